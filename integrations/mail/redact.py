"""Secrets in mail text, replaced by placeholders before any of it goes into a prompt.

`redact(text)` finds these kinds, each replaced by its placeholder (`PLACEHOLDERS`) and counted:

- **one_time_code**: 4-8 digits (or 3+3, 4+4 with a space or hyphen) named a code by the text around them:
  after a code word and a separator ("Verification code: 482913", "Ihr Bestätigungscode lautet 482913",
  "認証コードは482913です"), before one ("482913 is your code", "G-482913 is your Google verification
  code"), or named by what it is for ("Use 482913 to sign in"). Code words in English, German, French,
  Spanish, Italian, Portuguese, Dutch, Polish, Swedish, Finnish, Hungarian and Japanese.
- **password**: what follows a password label ("Password: x", "Passwort: x", "mot de passe : x",
  "pwd=x", "Passcode: x", "PIN: 1234"), or "password is x" when x looks like one (a digit or symbol in it).
- **card_number**: 13-19 digits, whole or in groups, starting 2-6 (the card networks' ranges), passing
  the Luhn check; **card_code**: the 3-4 digits after CVC, CVV, CVN, CID or CSC.
- **iban**: an IBAN, checked by python-stdnum (country, length, format and mod-97 check digits).
- **api_key**: keys in the shapes their vendors publish (AWS AKIA/ASIA, GitHub ghp_/github_pat_, Stripe
  sk_live_/rk_live_, Google AIza, Slack xox., OpenAI/Anthropic sk-), and any random-looking value after a
  key or secret label; **private_key**: a PEM private key block.
- **token**: a JWT, what follows "Bearer" or "Authorization:", a random-looking value after a token
  label, and secret query parameters of links (token=, code=, key=, password=, sig=...).

What keeps a look-alike from being replaced (a placeholder where an ask needs the text would lose it):
a number is a code only when a code word names it, and never after a postal, zip, area, promo, discount,
voucher, order, invoice, reference, tracking, product or error code word; a card number must pass Luhn,
start 2-6 and not follow an invoice, order, reference, account or tracking word ("Please pay invoice
12345 by Friday" keeps its number, and so does a 16-digit payment reference); an IBAN must pass its
checksum; a labelled key or token must look random (letters and digits, at least 16 characters, varied);
a password label followed by prose ("Password: please choose a new one") or a masked value ("****")
keeps it. A placeholder is never redacted again.

The count per kind is returned with the text, so a run can say how many secrets it kept from the LLM.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from stdnum import iban, luhn

PLACEHOLDERS: dict[str, str] = {
    "one_time_code": "[one-time code]",
    "password": "[password]",
    "card_number": "[card number]",
    "card_code": "[card code]",
    "iban": "[IBAN]",
    "api_key": "[API key]",
    "private_key": "[private key]",
    "token": "[token]",
}


@dataclass(frozen=True)
class Redacted:
    text: str
    counts: dict[str, int] = field(default_factory=dict)  # kind -> secrets replaced; kinds with none left out

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def redact(text: str) -> Redacted:
    """`text` with every secret found replaced by its kind's placeholder, and how many of each kind."""
    counts: Counter[str] = Counter()
    lowered = text.lower()
    for rule in _RULES:
        if not rule.needs or any(word in lowered for word in rule.needs):
            text = rule.apply(text, counts)
    return Redacted(text, {kind: counts[kind] for kind in PLACEHOLDERS if counts[kind]})


# Rules --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rule:
    """A pattern whose group `group` is a secret of `kind` when `check(match)` says so. `check` may return
    the length of the group's prefix that is the secret (an IBAN followed by a word in capitals). A text
    holding none of `needs` (lower-case) has nothing for the rule: a substring test is much cheaper."""

    kind: str
    pattern: re.Pattern[str]
    group: int | str = 0
    check: Callable[[re.Match[str]], bool | int] = lambda _match: True
    needs: tuple[str, ...] = ()

    def apply(self, text: str, counts: Counter[str]) -> str:
        def replace(match: re.Match[str]) -> str:
            verdict = self.check(match)
            if verdict is False:
                return match.group(0)
            start, end = match.span(self.group)
            if verdict is not True:
                end = start + int(verdict)
            counts[self.kind] += 1
            whole = match.string
            return whole[match.start(0) : start] + PLACEHOLDERS[self.kind] + whole[end : match.end(0)]

        return self.pattern.sub(replace, text)


_SEP = r"[ \u00a0\u2009\u202f-]"
# Word edges that Japanese, written without spaces, does not stop at: a letter other than kana or kanji.
_CJK = r"\u3040-\u30ff\u3400-\u9fff"
_START = rf"(?<![^\W{_CJK}])"
_STOP = rf"(?![^\W{_CJK}])"  # between digit groups: a space (also no-break or thin) or a hyphen
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS.values()))


def _looks_random(value: str) -> bool:
    """A generated secret rather than a word, a name or a number: letters and digits mixed, at least 16
    characters, and varied (Shannon entropy of at least 3 bits per character)."""
    if len(value) < 16 or not re.search(r"\d", value) or not re.search(r"[A-Za-z]", value):
        return False
    frequencies = Counter(value).values()
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in frequencies)
    return entropy >= 3.0


# Private keys, bearer tokens and JWTs, vendor keys ----------------------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
_TOKEN_CHARS = r"[A-Za-z0-9\-._~+/]"
_BEARER = re.compile(
    rf"(?:\bBearer|\bAuthorization\s*:\s*(?:Basic|Bearer|Token)?)\s+(?P<value>{_TOKEN_CHARS}{{12,4096}}=*)",
    re.IGNORECASE,
)


def _bearer(match: re.Match[str]) -> bool:
    """A credential, not a word ("bearer instruments"): a digit in it, or mixed case past its first letter."""
    value = match.group("value")
    return bool(re.search(r"\d", value)) or (value[1:] != value[1:].lower() and value[1:] != value[1:].upper())


_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
_END = r"(?![A-Za-z0-9_\-])"
_VENDOR_KEYS = re.compile(
    r"\b(?:"
    r"(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,255}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{22,255}"  # GitHub fine-grained tokens
    r"|[rs]k_(?:live|test)_[A-Za-z0-9]{16,255}"  # Stripe secret and restricted keys
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API keys
    r"|xox[abposr]-[A-Za-z0-9-]{10,255}"  # Slack tokens
    r"|sk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-)?)?[A-Za-z0-9_\-]{20,255}"  # OpenAI, Anthropic
    rf"){_END}"
)


def _vendor_key(match: re.Match[str]) -> bool:
    value = match.group(0)
    return not value.startswith("sk-") or _looks_random(value.replace("-", "").replace("_", ""))


# A key, secret or token named by a label: "API key: …", "client_secret=…", "token is …".
_LABELLED = re.compile(
    r"(?P<label>\b(?:api|access|secret|client|private|signing|auth|app|refresh|session|bearer|personal)?"
    r"[ _-]?(?:key(?:[ _-]?id)?|secret|token|apikey))\b"
    r"[\"']?\s*(?:[:=]|\bis\b|\bwas\b)?\s*[\"']?"
    r"(?P<value>[A-Za-z0-9+/_\-.=]{16,512})",
    re.IGNORECASE,
)


def _labelled(kind: str) -> Callable[[re.Match[str]], bool | int]:
    def check(match: re.Match[str]) -> bool | int:
        value = match.group("value")
        stripped = value.rstrip(".")  # a sentence's full stop
        if ("token" in match.group("label").lower()) != (kind == "token") or not _looks_random(stripped):
            return False
        return True if stripped == value else len(stripped)

    return check


_URL_SECRET = re.compile(
    r"[?&](?:access_token|id_token|refresh_token|token|api_key|apikey|key|code|otp|password|pwd|secret"
    r"|signature|sig|auth)=(?P<value>[^&#\s\"'<>\]]{8,})",
    re.IGNORECASE,
)

# IBAN ------------------------------------------------------------------------------------------------
# One character at a time (each with its optional space before it): a failed match backtracks linearly.
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ \u00a0]?[A-Z0-9]){11,30}\b")


def _iban(match: re.Match[str]) -> bool | int:
    """The longest run of the match's groups that is a valid IBAN (what follows may be a word)."""
    value = match.group(0)
    cuts = [m.start() for m in re.finditer(r"[ \u00a0]", value)] + [len(value)]
    for cut in reversed(cuts):
        if iban.is_valid(value[:cut]):
            return True if cut == len(value) else cut
    return False


# Cards -----------------------------------------------------------------------------------------------
_CARD = re.compile(
    rf"(?<![\w+/.,-])(?P<value>\d{{4}}{_SEP}?\d{{4}}{_SEP}?\d{{4}}{_SEP}?\d{{1,7}}|\d{{4}}{_SEP}?\d{{6}}{_SEP}?\d{{4,5}})"
    rf"(?![\w/-]|[.,]\d)"
)
_NOT_CARD_CONTEXT = re.compile(
    r"(?:invoice|order|ref(?:erence)?|account|acct|customer|client|tracking|shipment|parcel|booking|ticket|"
    r"policy|contract|case|no\.|nr\.?|#|rechnung|bestellung|auftrag|kunden|konto|sendung|facture|commande|"
    r"référence|factura|pedido|referencia|fattura|ordine|fatura|encomenda|factuur|bestelling|faktura|"
    r"zamówienie|tilaus|lasku|számla|rendelés|請求|注文)[^\n\d]{0,12}$",
    re.IGNORECASE,
)
_CARD_WORD = re.compile(r"card|karte|carte|tarjeta|carta|cartão|kaart|kort|kortti|kártya|カード", re.IGNORECASE)


def _card(match: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", match.group("value"))
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456" or not luhn.is_valid(digits):
        return False
    before = match.string[max(0, match.start() - 40) : match.start()]
    return bool(_CARD_WORD.search(before)) or not _NOT_CARD_CONTEXT.search(before)


_CARD_CODE = re.compile(r"\b(?:CVC2?|CVV2?|CVN|CID|CSC)\b\s*(?:code\s*)?[:#=]?\s*(?P<value>\d{3,4})(?!\d)")

# Passwords -------------------------------------------------------------------------------------------
# Labels that also end compounds ("Initialpasswort", "engångslösenord") match inside a word; the others
# only as whole words.
_PASSWORD_WORDS = (
    r"(?:(?:password|passwort|kennwort|wachtwoord|lösenord|losenord|salasana|jelszó|jelszo|senha)"
    rf"|{_START}(?:passcode|passphrase|pass phrase|pwd|mot de passe|mdp|contraseña|contrasena|hasło|haslo)"
    r"|パスワード|暗証番号)"
)
_PASSWORD_COLON = re.compile(
    rf"(?:{_PASSWORD_WORDS}{_STOP}|(?-i:\bPIN\b))[ \t]*(?:\([^)\n]{{0,30}}\))?[ \t]*[:\uff1a=][ \t]*\n?[ \t]*"
    r"(?P<value>[^\s]{1,128})(?=(?P<rest>[^\n]*))",
    re.IGNORECASE,
)
_PASSWORD_IS = re.compile(
    rf"{_PASSWORD_WORDS}{_STOP}[ \t]+(?:is|ist|lautet|est|es|è|é|är|on|jest|wynosi|は)[ \t:]+"
    r"(?P<value>[^\s]{6,128}?)(?=[.,;]?(?:\s|$))",
    re.IGNORECASE,
)
_MASKED = re.compile(r"[*•·.x_-]+|\(?(?:none|n/a|unchanged|hidden)\)?", re.IGNORECASE)


def _password_after_colon(match: re.Match[str]) -> bool | int:
    value = match.group("value")
    if _MASKED.fullmatch(value) or _PLACEHOLDER.match(value):
        return False
    if value.isalpha() and len(match.group("rest").split()) >= 2:
        return False  # prose: "Password: please choose a new one at first sign-in"
    stripped = value.rstrip(".,;")
    return len(stripped) if stripped and stripped != value else True


def _password_after_is(match: re.Match[str]) -> bool:
    value = match.group("value")
    return not _PLACEHOLDER.match(value) and bool(re.search(r"[\d\W_]", value))


# One-time codes --------------------------------------------------------------------------------------
_CODE = r"(?P<value>(?<![\d.,/])(?:\d{4}(?:" + _SEP + r"\d{4})?|\d{3}" + _SEP + r"\d{3}|\d{4,8})(?![\d]|[.,:/-]\d))"
# Code words that say the number is for signing in or confirming, in the twelve languages of the cleaner.
_STRONG_CODE_WORDS = (
    rf"(?:{_START}(?:verification|security|confirmation|login|log-in|sign-in|signin|one-time|one time|single-use|"
    r"access|authentication|auth|2fa|mfa|sms|otp|pass)[ -]?code"
    r"|(?:bestätigungs|sicherheits|verifizierungs|einmal|anmelde|freigabe|zugangs|bevestigings|"
    r"verificatie|beveiligings|verifierings|engångs|säkerhets|bekräftelse|vahvistus|varmistus|tunnistus|"
    r"kertakäyttö)(?:code|kod|koodi(?:si|nne)?)"
    rf"|{_START}(?:code (?:de (?:vérification|confirmation|sécurité|connexion)|d'accès|à usage unique)"
    r"|código de (?:verificación|seguridad|confirmación|acceso|verificação|segurança|confirmação)"
    r"|codice (?:di (?:verifica|sicurezza|conferma|accesso)|monouso)"
    r"|kod (?:weryfikacyjny|jednorazowy|potwierdzający|bezpieczeństwa|dostępu)"
    r"|(?:ellenőrző|biztonsági|megerősítő|egyszer használatos) kód"
    r"|認証コード|確認コード|セキュリティコード|ワンタイム(?:パスワード|コード)"
    r"|OTP|(?-i:m?TAN)|one-time password|one time password|einmalpasswort))"
)
_PLAIN_CODE_WORDS = r"(?:code|kod|koodi|kód|código|codice|コード)"
_NOT_CODE = re.compile(
    r"(?:post|postal|zip|area|country|dial|bar|promo|promotional|discount|voucher|coupon|gift|referral|rabatt|"
    r"gutschein|aktions|korting|kortings|alennus|rabattkod|order|invoice|reference|ref|tracking|product|"
    r"article|error|status|tax|sort|bank|swift|bic|iban|hs|source|qr|dress|booking|reservation|meeting)"
    r"[ -]?$",
    re.IGNORECASE,
)
_IS = r"(?:is|ist|lautet|est|es|è|é|är|on|jest|to|wynosi)"
# What may stand between a code word and its number: nothing, a separator, or a few words ending in "is" or a
# separator ("code for Acme Bank is", "code to sign in:"), never a sentence's end.
_BETWEEN = rf"(?:[^\n\d.!?]{{0,30}}?(?:[ \t]{_IS}(?!\w)|[:\uff1a=])|)[ \t]*:?[ \t]*(?:は)?"
_CODE_AFTER_STRONG = re.compile(rf"{_STRONG_CODE_WORDS}{_STOP}{_BETWEEN}{_CODE}", re.IGNORECASE)
_CODE_AFTER_PLAIN = re.compile(
    rf"{_START}{_PLAIN_CODE_WORDS}{_STOP}(?:[^\n\d.!?]{{0,30}}?(?:[ \t]{_IS}(?!\w)|[:\uff1a=])|は)"
    rf"[ \t]*:?[ \t]*{_CODE}",
    re.IGNORECASE,
)
_CODE_BEFORE = re.compile(
    rf"(?<![\w-])(?:G-)?{_CODE}[ \t]+(?:is|est|ist|es|è|é|är|on|jest|to)[ \t]+"
    r"(?:your|votre|ton|ihr|dein|tu|su|il tuo|la tua|o seu|o teu|a sua|uw|je|twój|din|sinun|az ön)\b"
    rf"[^\n.!?\d]{{0,40}}?(?:{_PLAIN_CODE_WORDS}|{_STRONG_CODE_WORDS}){_STOP}",
    re.IGNORECASE,
)


# "Use 482913 to sign in", "Enter 482913 to verify your email".
_CODE_TO_SIGN_IN = re.compile(
    rf"\b(?:use|enter|type|input)[ \t]+(?:the[ \t]+code[ \t]+)?{_CODE}[ \t]+(?:to|for)[ \t]+"
    r"(?:sign|log|verify|confirm|complete|finish|reset|access|authenticate|continue)",
    re.IGNORECASE,
)


def _plain_code(match: re.Match[str]) -> bool:
    """Not a code of another kind: "Zip code: 10115", "Promo code: 482913"."""
    return not _NOT_CODE.search(match.string[max(0, match.start() - 20) : match.start()])


_PASSWORD_NEEDS = (
    "passw", "kennwort", "wachtwoord", "lösenord", "losenord", "salasana", "jelsz", "senha", "passcode",
    "passphrase", "pass phrase", "pwd", "mot de passe", "mdp", "contrase", "hasło", "haslo", "パスワード", "暗証番号",
    "pin",
)  # fmt: skip
_CODE_NEEDS = ("code", "kod", "kood", "kód", "códig", "codic", "コード", "otp", "tan", "password", "passwort")

_RULES: tuple[_Rule, ...] = (
    _Rule("private_key", _PRIVATE_KEY, needs=("private key",)),
    _Rule("token", _BEARER, "value", _bearer, needs=("bearer", "authorization")),
    _Rule("token", _JWT, needs=("eyj",)),
    _Rule("api_key", _VENDOR_KEYS, check=_vendor_key, needs=("akia", "asia", "gh", "sk_", "rk_", "aiza", "xox", "sk-")),
    _Rule("api_key", _LABELLED, "value", _labelled("api_key"), needs=("key", "secret")),
    _Rule("token", _LABELLED, "value", _labelled("token"), needs=("token",)),
    _Rule("token", _URL_SECRET, "value", needs=("=",)),
    _Rule("iban", _IBAN, check=_iban),
    _Rule("card_number", _CARD, "value", _card),
    _Rule("card_code", _CARD_CODE, "value", needs=("cvc", "cvv", "cvn", "cid", "csc")),
    _Rule("password", _PASSWORD_COLON, "value", _password_after_colon, needs=_PASSWORD_NEEDS),
    _Rule("password", _PASSWORD_IS, "value", _password_after_is, needs=_PASSWORD_NEEDS),
    _Rule("one_time_code", _CODE_AFTER_STRONG, "value", needs=_CODE_NEEDS),
    _Rule("one_time_code", _CODE_AFTER_PLAIN, "value", _plain_code, needs=_CODE_NEEDS),
    _Rule("one_time_code", _CODE_BEFORE, "value", needs=_CODE_NEEDS),
    _Rule("one_time_code", _CODE_TO_SIGN_IN, "value", needs=("use", "enter", "type", "input")),
)
