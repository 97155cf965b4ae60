from typing import Any

from django.conf import settings
from django.http import HttpRequest


def simulated_services(request: HttpRequest) -> dict[str, Any]:
    """Which external services are the local sandbox, so every page can say so plainly."""
    simulated = [
        name
        for name, flag in (
            ("Google sign-in and Gmail", settings.GOOGLE_SIMULATED),
            ("Microsoft sign-in and Outlook", settings.MICROSOFT_SIMULATED),
            ("Gemini", settings.GEMINI_SIMULATED),
        )
        if flag
    ]
    return {"simulated_services": simulated}
