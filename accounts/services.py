from accounts.models import User


def user_create(*, email: str, password: str, name: str = "") -> User:
    return User.objects.create_user(email=email, password=password, name=name)
