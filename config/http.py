from django.http import HttpRequest


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent the request (django-htmx sets `request.htmx`), so a partial is the answer."""
    return bool(getattr(request, "htmx", False))
