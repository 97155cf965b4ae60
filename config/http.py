from django.http import HttpRequest

from accounts.models import User


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent the request (django-htmx sets `request.htmx`), so a partial is the answer."""
    return bool(getattr(request, "htmx", False))


def request_user(request: HttpRequest) -> User:
    """The signed-in person of a view behind login_required (or an API route behind django_auth)."""
    user = request.user
    assert isinstance(user, User), "request_user is for views that require login"
    return user
