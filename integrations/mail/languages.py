"""What mail clients write, language by language: quote headers, sign-offs, a phone's signature line.

The quote headers are what Gmail, Apple Mail, Thunderbird, Outlook, Yandex and Zoho write in the client's
own language; each pattern here has its fixture under tests/fixtures/mail/ (or a case in
tests/integrations/test_clean_*.py). Sign-offs and "Sent from" lines are what people and phones
write; `clean.py` applies them only in the email's own languages (`LANGUAGES`). `QUOTE_HEADERS` holds the
headers of those languages and of a few more (Danish, Russian) whose sign-offs are not read yet: a header is
looked for in every language at once, as the sender's client writes it. `ASK` is what reads as an ask in any
of them: a cut never drops it. `POSTSCRIPT` and `FOOTER` are matched in every language at once too, each for
its own reason (see each).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class HeaderWords:
    # The "On <date>, <name> wrote" line of Gmail, Apple Mail and Thunderbird, without its final colon. It
    # must match a whole line (or up to three, as Gmail wraps it), and a digit must be in it.
    wrote: tuple[str, ...]
    # Outlook's header block (and the block of a forward): the "From" field names, then the others.
    from_fields: tuple[str, ...]
    fields: tuple[str, ...]
    # Apple Mail's line above a forwarded message's header block.
    forwarded: tuple[str, ...]
    # What stands between the dashes of Outlook's, Gmail's and phones' separator lines ("-----Original
    # Message-----", "---------- Forwarded message ---------"): such a line starts quoted history by itself.
    separators: tuple[str, ...]


@dataclass(frozen=True)
class Language(HeaderWords):
    signoffs: tuple[str, ...]
    sent_from: str  # a phone's signature line


LANGUAGES: dict[str, Language] = {
    "en": Language(
        (r"On\b.+\bwrote",),
        ("From",),
        ("Sent", "Date", "To", "Cc", "Bcc", "Subject", "Reply-To"),
        ("Begin forwarded message",),
        (r"Original Message", r"Forwarded message"),
        (
            r"Thanks(?: again| a lot| so much)?",
            "Thank you",
            "Many thanks",
            "Cheers",
            "Best",
            "Regards",
            r"(?:Best|Kind|Warm|Warmest|Many) regards",
            "Best wishes",
            "All the best",
            r"(?:Yours )?sincerely",
            "Yours truly",
            "Talk soon",
            "Thx",
            "BR",
        ),
        r"Sent from my|(?:Get|Download) Outlook for",
    ),
    "de": Language(
        (r"Am\b.+\bschrieb\b.*",),
        ("Von",),
        ("Gesendet", "Datum", "An", "Cc", "Kopie", "Betreff", "Antwort an"),
        (r"Anfang der weitergeleiteten (?:Nachricht|E-Mail)",),
        (r"Ursprüngliche Nachricht", r"Weitergeleitete Nachricht", "Originalnachricht"),
        (
            r"Mit freundlichen Gr(?:ü|ue)(?:ß|ss)en",
            r"(?:Freundliche|Viele|Beste|Liebe|Herzliche) Gr(?:ü|ue)(?:ß|ss)e",
            r"Gr(?:ü|ue)(?:ß|ss)e",
            r"Gru(?:ß|ss)",
            "MfG",
            "LG",
            "VG",
            "Danke",
            "Vielen Dank",
        ),
        r"Gesendet von (?:meinem|Outlook für)|Von meinem \w+ gesendet",
    ),
    "fr": Language(
        (r"Le\b.+\ba écrit",),
        ("De",),
        (
            "Envoyé le",
            "Envoyé",
            "Date",
            "Message du",
            "À",
            "A",
            "Pour",
            "Cc",
            "Copie à",
            "Objet",
            "Sujet",
            "Répondre à",
        ),
        (r"Début du message (?:réexpédié|transféré)",),
        (r"Message d'origine", r"Message (?:transféré|original)"),
        (
            r"(?:Bien )?cordialement",
            "Bien à vous",
            r"(?:Meilleures )?salutations",
            r"Merci(?: beaucoup)?",
            "Bonne journée",
            "Amicalement",
            "Bises",
        ),
        r"Envoyé de mon|Envoyé depuis|Télécharger Outlook pour",
    ),
    "es": Language(
        (r"El\b.+\bescribió",),
        ("De", "Remitente"),
        ("Enviado el", "Enviado", "Fecha", "Para", "CC", "CCO", "Asunto", "Responder a"),
        ("Inicio del mensaje reenviado",),
        (r"Mensaje (?:original|reenviado)",),
        (r"(?:Un )?saludos?(?: cordiales)?", "Atentamente", "Cordialmente", r"(?:Muchas )?gracias", "Un abrazo"),
        r"Enviado desde mi",
    ),
    "it": Language(
        (r"(?:Il|In data)\b.+\bha scritto",),
        ("Da", "Mittente"),
        ("Inviato", "Data", "A", "Cc", "Oggetto", "Rispondi a"),
        ("Inizio messaggio inoltrato",),
        (r"Messaggio (?:originale|inoltrato)",),
        (r"(?:Cordiali|Distinti) saluti", "Saluti", "Un saluto", r"Grazie(?: mille)?", "A presto"),
        r"Inviato da",
    ),
    "pt": Language(
        (r"Em\b.+\bescreveu",),
        ("De", "Remetente"),
        ("Enviado em", "Enviada em", "Enviado", "Enviada", "Data", "Para", "Cc", "Assunto", "Responder a"),
        (r"Início da mensagem (?:reencaminhada|encaminhada)",),
        (r"Mensagem (?:original|encaminhada|reencaminhada)",),
        (
            "Atenciosamente",
            r"(?:Melhores )?cumprimentos",
            r"Abraços?",
            r"Obrigad[oa]",
            "Muito obrigad[oa]",
            "Saudações",
            "Att",
        ),
        r"Enviado do meu",
    ),
    "nl": Language(
        (r"Op\b.+\bschreef\b.*", r"Op\b.+\bheeft\b.+\bhet volgende geschreven"),
        ("Van", "Afzender"),
        ("Verzonden", "Datum", "Aan", "CC", "Onderwerp", "Antwoord aan"),
        ("Begin doorgestuurd bericht",),
        (r"(?:Oorspronkelijk|Origineel|Doorgestuurd) bericht",),
        (
            r"(?:Met )?vriendelijke groet(?:en)?",
            r"(?:Hartelijke )?groet(?:en)?",
            "Bedankt",
            "Dank je",
            "Dank u",
            "Mvg",
            "Gr",
        ),
        r"Verzonden vanaf mijn|Verstuurd vanaf mijn",
    ),
    "pl": Language(
        (
            r".*\b(?:napisał\(a\)|napisała|napisał|nadesłał)",  # Gmail: "W dniu <date> <name> napisał(a):"
            r"W dniu\b.+\bpisze",  # Thunderbird
            r"Wiadomość napisana przez\b.+\bw dniu\b.+",  # Apple Mail
        ),
        ("Od", "Nadawca"),
        ("Wysłano", "Data", "Do", "Adresat", "DW", "Temat", "Odpowiedź do"),
        ("Początek przekazywanej wiadomości",),
        (r"(?:Oryginalna|Przekazana) wiadomość", r"Wiadomość (?:oryginalna|przekazana)"),
        (r"(?:Serdecznie )?pozdrawiam", r"Z powa(?:ż|z)aniem", "Pozdrowienia", "Dziękuję", "Dzięki", "Pozdr"),
        r"Wysłano z",
    ),
    "sv": Language(
        (r"(?:Den\b.+|.*\d.*)\bskrev\b.*",),
        ("Från", "Avsändare"),
        ("Skickat", "Datum", "Till", "Kopia", "Ämne", "Svara till"),
        (r"Vidarebefordrat (?:brev|mejl|meddelande)",),
        (r"(?:Ursprungligt|Vidarebefordrat) meddelande", "Originalmeddelande"),
        (r"(?:Med )?vänliga hälsningar", r"(?:Bästa )?hälsningar", "Mvh", r"Tack(?: så mycket)?", r"/\w+"),
        r"Skickat från min",
    ),
    "fi": Language(
        (r".*\bkirjoitti\b.*",),
        ("Lähettäjä",),
        ("Lähetetty", "Päivämäärä", "Vastaanottaja", "Kopio", "Aihe", "Vastausosoite"),
        ("Välitetty viesti alkaa",),
        (r"(?:Alkuperäinen|Välitetty) viesti",),
        (r"(?:Ystävällisin|Parhain) terveisin", "Terveisin", r"Kiitos(?: paljon)?", "Tervehtien", r"Yst\. terv\."),
        r"Lähetetty \w+sta",
    ),
    "hu": Language(
        (r".*\bírta\b.*",),  # Gmail: "<name> ezt írta (időpont: <date>)"; Apple Mail: "<date> dátummal … írta"
        ("Feladó",),
        ("Elküldve", "Küldve", "Dátum", "Címzett", "Másolatot kap", "Másolat", "Tárgy", "Válaszcím"),
        ("Továbbított levél kezdete",),
        (r"Eredeti üzenet", r"Továbbított (?:levél|üzenet)"),
        (r"(?:Baráti )?üdvözlettel", "Tisztelettel", "Köszönöm", "Köszönettel", "Üdv", "Üdvözlet"),
        r"\S+ küldve",
    ),
    "ja": Language(
        (
            r"\d{4}年\d{1,2}月\d{1,2}日.*\d{1,2}:\d{2}.*<[^<>\s]+@[^<>\s]+>",  # Gmail: "<date> <time> <name> <address>"
            r"\d{4}/\d{1,2}/\d{1,2}.*\d{1,2}:\d{2}.*のメール",  # Apple Mail
        ),
        ("差出人", "送信者"),
        ("送信日時", "日付", "宛先", "CC", "件名"),
        ("転送されたメッセージ",),
        ("元のメッセージ", "転送メッセージ"),
        (r"(?:以上、)?(?:よろしく|宜しく)お願い(?:いた|致)?します", "ありがとうございます"),
        r"\S+から送信",
    ),
}

# The headers of languages whose sign-offs are not read yet (a sign-off rule needs its own fixtures against
# the other languages' words, as Danish "Tak" in English "Take" showed), found all the same.
QUOTE_HEADERS: dict[str, HeaderWords] = {
    **LANGUAGES,
    "da": HeaderWords(
        (r"(?:Den\b.+|.*\d.*)\bskrev\b.*",),  # Gmail and Apple Mail: "Den <date> kl. 10.00 skrev <name>:"
        ("Fra", "Afsender"),
        ("Sendt", "Dato", "Til", "Cc", "Emne", "Svar til"),
        ("Start på videresendt besked",),
        (r"Oprindelig (?:besked|meddelelse)", r"Videresendt (?:besked|meddelelse)"),
    ),
    "ru": HeaderWords(
        (r".*\d.*\b(?:написал\(а\)|написала|написал|пишет)",),  # noqa: RUF001  (Apple Mail, Thunderbird)
        ("От", "Отправитель"),
        ("Отправлено", "Дата", "Кому", "Копия", "Тема", "Ответить"),
        ("Начало переадресованного сообщения",),
        (r"Исходное сообщение", r"(?:Пересылаемое|Пересланное) сообщение"),
    ),
}

# A quote header's attribution line, wherever the quote follows as ">" lines (so that the line need not be
# certain on its own): a digit, then one of these verbs near its end, the colon optional.
WROTE_VERBS = (
    r"wrote|schrieb|a écrit|escribió|ha scritto|escreveu|schreef|geschreven|napisał\(a\)|napisała|napisał|pisze|skrev"
    r"|kirjoitti|írta|のメール|написал\(а\)|написала|написал|пишет"  # noqa: RUF001
)

# Some clients name the earlier message's sender "you" when it was the reader's own, with no address or time:
# "On Nov 26, 2013 you wrote:" (crisp-oss's email_unquoted_reply). Only a date's and a time's words stand between
# "On" and "you wrote", so that a person's "On reflection, I agree with what you wrote:" stays theirs. English
# only: the other languages' forms ("vous avez écrit", "schrieben Sie") wait for a fixture each.
_DATE_WORD = r"(?:\d[\d/.:-]*|[A-Z][a-z]{2,8}\.?|at|@|[AaPp]\.?[Mm]\.?|GMT|UTC|[+-]\d{2}:?\d{2})"
YOU_WROTE = rf"On (?:{_DATE_WORD},? ){{1,8}}you wrote"

# What opens a postscript: "P.S.", "PS:", "P.P.S.", Spanish "PD:", "NB:", French "P.-S.", Hungarian "Ui.:",
# Swedish "OBS!", Finnish "Huom:", Japanese "追伸". Bare letters need their punctuation ("PS " only in capitals),
# so that "UI Designer" under a name stays a title. In every language at once: it only ever keeps a line.
POSTSCRIPT = re.compile(
    r"(?:p\.\s?p\.\s?s|p\.\s?-?s|p\.\s?d|n\.\s?b|u\.\s?i)\.?(?=[\s:,]|$)"
    r"|(?:pps|ps|pd|nb|obs|huom|ui)\s?[.:!,\u2013-]|(?-i:PPS|PS)\s|追伸",
    re.IGNORECASE,
)

# A company's legal footer: a paragraph holding a confidentiality word and a word for the message's recipient
# or for its reaching them in error (a person's "please keep this email confidential" has neither), or asking
# to think of the environment before printing. In every language at once, as a company's footer is often in
# another language than the text, or in two.
_FOOTER_TERMS = (
    r"confidential|privileged|disclaimer|unauthori[sz]ed|prohibited|vertraulich|confidentiel|confidencial|riservat|"
    r"confidenzial|vertrouwelijk|poufn|konfidentiell|sekretess|luottamuksellinen|bizalmas"
)
_FOOTER_RECIPIENTS = (
    r"recipient|addressee|in error|empfänger|adressat|irrtümlich|destinataire|par erreur|destinatari|destinatário|"
    r"por error|per errore|por engano|geadresseerde|ontvanger|per vergissing|adresat|odbiorc|omyłkowo|mottagare|"
    r"av misstag|vastaanottaja|erehdyksessä|címzett|tévedésből"
)
FOOTER = re.compile(
    rf"(?=.*(?:\b(?:{_FOOTER_TERMS})|機密|秘密))(?=.*(?:\b(?:{_FOOTER_RECIPIENTS})|宛先|誤って|誤送信))"
    r"|.*\benvironment before printing",
    re.IGNORECASE,
)

# A question, a "please" in one of the languages, or a line that starts with a common imperative. The
# "please" of the Japanese sign-off (よろしくお願いします) is not an ask.
ASK = re.compile(
    r"[?\uff1f]|ください|(?<!よろしく)(?<!宜しく)お願い"
    r"|\b(?:please|pls|kindly|let me know|make sure|don'?t forget|bitte|merci de|veuillez|s'il (?:te|vous) pla[iî]t|"
    r"por favor|per favore|alsjeblieft|alstublieft|gelieve|proszę|prosimy|snälla|vänligen|ole hyvä|kérem|kérlek|"
    r"légy szíves)\b"
    r"|(?:^|[.!]\s+)(?:send|take|call|check|review|sign|confirm|book|pay|let|remember|forward|reply|update|"
    r"approve|schedule|share|fill|complete|submit|prepare|bring|arrange|order|print|schick|sende|ruf|"
    r"envoie[zs]?|appelle[zs]?|envía|manda|invia|envie|stuur|bel|wyślij|skicka|ring|lähetä|soita|küldd?)\b",
    re.IGNORECASE | re.MULTILINE,
)
