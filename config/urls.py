from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from accounts import views as account_views
from config.api import api
from config.health import healthz
from tasks import views as task_views

urlpatterns = [
    path("", task_views.home, name="home"),
    path("signup/", account_views.signup, name="signup"),
    path("login/", account_views.TaskliftLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
