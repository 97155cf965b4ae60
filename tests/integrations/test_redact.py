"""Secrets in mail are replaced by placeholders and counted; numbers and words that only look like one stay."""

from __future__ import annotations

import time

import pytest

from integrations.mail.redact import PLACEHOLDERS, redact

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (text, kind, the secret in it)
SECRETS = [
    # one-time codes, after a code word or before one, in the cleaner's languages
    ("Your verification code is 482913.", "one_time_code", "482913"),
    ("code: 123456", "one_time_code", "123456"),
    ("Your WhatsApp code: 123-456", "one_time_code", "123-456"),
    ("Enter this code to sign in: 482 913", "one_time_code", "482 913"),
    ("Your code for Acme Bank is 48291337.", "one_time_code", "48291337"),
    ("123456 is your code", "one_time_code", "123456"),
    ("G-482913 is your Google verification code.", "one_time_code", "482913"),
    ("Use 482913 to sign in.", "one_time_code", "482913"),
    ("Enter 4829 1337 to verify your email address.", "one_time_code", "4829 1337"),
    ("Ihr Bestätigungscode lautet 482913.", "one_time_code", "482913"),
    ("Ihre mTAN: 482913", "one_time_code", "482913"),
    ("Votre code de vérification est 482913", "one_time_code", "482913"),
    ("Tu código de verificación es 482913", "one_time_code", "482913"),
    ("Il tuo codice di verifica è 482913", "one_time_code", "482913"),
    ("O seu código de verificação é 482913", "one_time_code", "482913"),
    ("Je verificatiecode is 482913", "one_time_code", "482913"),
    ("Twój kod weryfikacyjny to 482913", "one_time_code", "482913"),
    ("Din engångskod: 482913", "one_time_code", "482913"),
    ("Vahvistuskoodisi on 482913", "one_time_code", "482913"),
    ("Az ellenőrző kód: 482913", "one_time_code", "482913"),
    ("認証コードは482913です", "one_time_code", "482913"),
    # passwords
    ("Password: hunter2", "password", "hunter2"),
    ("Temporary password: Xk9#mP0!qL\nPlease sign in and change it before Monday.", "password", "Xk9#mP0!qL"),
    ("Initialpasswort: Geheim123!", "password", "Geheim123!"),
    ("mot de passe : azerty12", "password", "azerty12"),
    ("Contraseña: Verano2026", "password", "Verano2026"),
    ("pwd=s3cr3t!", "password", "s3cr3t!"),
    ("Passcode: 482913", "password", "482913"),
    ("PIN: 4821", "password", "4821"),
    ("Your password is Tr0ub4dor&3.", "password", "Tr0ub4dor&3"),
    ("Kennwort (neu): Sommer2026", "password", "Sommer2026"),
    ("パスワード：hikari77", "password", "hikari77"),  # noqa: RUF001 (Japanese mail writes a full-width colon)
    # cards, IBANs
    ("Card: 4111 1111 1111 1111, expiry 08/28", "card_number", "4111 1111 1111 1111"),
    ("card number 5555555555554444", "card_number", "5555555555554444"),
    ("Amex 3782 822463 10005", "card_number", "3782 822463 10005"),
    ("expiry 08/28, CVC 703", "card_code", "703"),
    ("IBAN: DE89 3704 0044 0532 0130 00\nBIC: COBADEFFXXX", "iban", "DE89 3704 0044 0532 0130 00"),
    ("IBAN DE89370400440532013000 BIC COBADEFFXXX", "iban", "DE89370400440532013000"),
    ("Pay to GB82 WEST 1234 5698 7654 32 today", "iban", "GB82 WEST 1234 5698 7654 32"),
    # API keys and tokens
    ("AWS key AKIAIOSFODNN7EXAMPLE", "api_key", "AKIAIOSFODNN7EXAMPLE"),
    ("aws secret: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "api_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("use ghp_1234567890abcdefghijklmnopqrstuvwxyz12 for CI", "api_key", "ghp_1234567890abcdefghijklmnopqrstuvwxyz12"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz01", "api_key", "github_pat_11ABCDEFG0123456789_"),
    ("Stripe: sk_live_51HqLyjWDarjtT1zdp7dcXYZabc", "api_key", "sk_live_51HqLyjWDarjtT1zdp7dcXYZabc"),
    ("maps key AIzaSyD-1234567890abcdefghijklmnopqrstu", "api_key", "AIzaSyD-1234567890abcdefghijklmnopqrstu"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "api_key", "xoxb-123456789012"),
    ("OPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34", "api_key", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34"),
    ("api_key: 8f14e45fceea167a5a36dedd4bea2543", "api_key", "8f14e45fceea167a5a36dedd4bea2543"),
    ("client secret is 'Zx8y7Wv6Ut5Sr4Qp3On2Ml1'", "api_key", "Zx8y7Wv6Ut5Sr4Qp3On2Ml1"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "private_key", "MIIEow"),
    (f"Authorization: Bearer {JWT}", "token", JWT),
    (f"the session is {JWT} here", "token", JWT),
    ("curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0'", "token", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("access token: ya29.a0AfH6SMBx3f9Kd82jLq0ZpXw7", "token", "ya29.a0AfH6SMBx3f9Kd82jLq0ZpXw7"),
    ("Reset it: https://app.example.com/reset?token=a8Fk29dLq0Zx&user=4", "token", "a8Fk29dLq0Zx"),
]

# Text that must reach the prompt as it is: asks, references and words that only look like secrets.
KEPT = [
    "Please pay invoice 12345 by Friday.",
    "Please pay invoice 4111111111111111 by Friday.",  # passes Luhn, but an invoice number
    "Payment reference 4111 1111 1111 1111, due December 5.",
    "Order #100200, total 48.00 EUR, paid with Visa ending in 4242.",
    "Our office: Hauptstraße 1, 10115 Berlin. Zip code: 10115. Postcode 10115.",
    "Use discount code: 2026 at checkout. Promo code: 482913.",
    "Call +44 20 7946 0958 or +49 1512 3456 7890.",
    "The meeting is on 2026-11-27 at 10:00, room 4021.",
    "Password: please choose a new one at first sign-in.",
    "Password: ********",
    "Your password is about to expire. Please change it by Friday.",
    "The security code policy changed in 2024.",
    "I got a tan in 2019.",
    "Bearer instruments are risky.",
    "The key is under the mat, and the API key is in the vault.",
    "Error code: 0x8007 and error code 5023.",
    "Tracking number 1Z999AA10123456784.",
    "Invoice no. 2026-0042 of 1.200,00 EUR.",
    "The code review is on Thursday at 1400.",
    "See https://docs.example.com/page?id=12345678 for details.",
    "IBAN DE00 1234 5678 9012 3456 78 is not valid.",  # fails its check digits
    "Card 4111 1111 1111 1112 is a typo.",  # fails Luhn
    "Bitte überweisen Sie den Betrag bis zum 15. Dezember.",
    "Could you send me the token budget for Q3 by Friday?",
    "Use 2026 to plan the budget, and enter 12 for the team size.",
]


@pytest.mark.parametrize(("text", "kind", "secret"), SECRETS)
def test_a_secret_is_replaced_by_its_placeholder_and_counted(text: str, kind: str, secret: str) -> None:
    redacted = redact(text)

    assert secret not in redacted.text
    assert PLACEHOLDERS[kind] in redacted.text
    assert redacted.counts == {kind: 1}
    assert redacted.total == 1


@pytest.mark.parametrize("text", KEPT)
def test_text_that_only_looks_like_a_secret_is_kept(text: str) -> None:
    assert redact(text).text == text
    assert redact(text).counts == {}


def test_the_words_around_a_secret_and_its_asks_stay() -> None:
    text = (
        "Hi John,\n\nCould you book the Berlin flights for the team with the company card?\n"
        "Card: 4111 1111 1111 1111, expiry 08/28, CVC 703\n"
        "Your one-time code is 482913, the IBAN for the refund is DE89 3704 0044 0532 0130 00.\n"
        "Temporary password: Xk9#mP0!qL\nThanks,\nMary"
    )

    redacted = redact(text)

    assert redacted.text == (
        "Hi John,\n\nCould you book the Berlin flights for the team with the company card?\n"
        "Card: [card number], expiry 08/28, CVC [card code]\n"
        "Your one-time code is [one-time code], the IBAN for the refund is [IBAN].\n"
        "Temporary password: [password]\nThanks,\nMary"
    )
    assert redacted.counts == {"one_time_code": 1, "password": 1, "card_number": 1, "card_code": 1, "iban": 1}


def test_several_secrets_of_a_kind_are_each_counted() -> None:
    redacted = redact("Codes: code: 111111, code: 222222.\nPassword: aB3$xyz PIN: 4821")

    assert redacted.counts == {"one_time_code": 2, "password": 2}
    assert not any(secret in redacted.text for secret in ("111111", "222222", "aB3$xyz", "4821"))


def test_redacting_twice_changes_nothing_more() -> None:
    once = redact(f"Password: hunter2\nToken: {JWT}\nCard 4111111111111111")
    assert redact(once.text).text == once.text
    assert redact(once.text).counts == {}


@pytest.mark.parametrize(
    "text",
    [
        "1" * 200_000,
        "1234 " * 40_000,
        "AB12" + "X" * 200_000,
        ("DE89 " + "ABCD " * 10) * 4_000,
        "verification code is " * 10_000,
        "password: " * 20_000,
        "Please review the budget and send it back by Friday. " * 4_000,
    ],
    ids=["digits", "digit-groups", "capitals", "iban-like", "code-words", "password-labels", "prose"],
)
def test_redaction_takes_linear_time_on_hostile_text(text: str) -> None:
    started = time.perf_counter()
    redact(text)
    # About 0.1-1 s for 200,000 characters alone, six times that beside the suite's four workers on two cores;
    # quadratic would be hours.
    assert time.perf_counter() - started < 20
