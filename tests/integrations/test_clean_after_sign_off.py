"""What the person writes below a sign-off reaches the prompt; the signature below it does not (issue 32).

Replies that deliver something often say so after "Thanks!": on Enron threads, "Attached is the file. … Thanks!
Done: the report. D. Giron" reached Gemini as its first two lines, the delivering line cut as signature. A
line after a sign-off is signature only where it looks like one (a name, a title, contact lines, a legal
footer); a postscript, a short sentence or an item is the person's, in any language.

And a quote header with no address, over a quote with no ">" (crisp-oss's `email_unquoted_reply`), cuts
the quote, where the same words inside a sentence of the person's cut nothing.
"""

# ruff: noqa: RUF001  (Japanese writes full-width punctuation)
from __future__ import annotations

import pytest

from integrations.mail.clean import clean_body


def _cleaned(body: str) -> str:
    return clean_body(body, max_chars=4_000)


def test_a_postscript_after_sign_off_reaches_the_prompt_and_the_name_below_it_does_not():
    assert _cleaned("See you then.\nThanks!\n\nP.S. Booked.\n\nDan") == "See you then.\nThanks!\n\nP.S. Booked."


def test_a_delivered_item_after_sign_off_reaches_the_prompt_with_the_text_above_it():
    body = "Attached is the file.\nLet me know if you have any questions.\nThanks!\n\nDone: the report.\n\nD. Giron"
    assert _cleaned(body) == (
        "Attached is the file.\nLet me know if you have any questions.\nThanks!\n\nDone: the report."
    )


@pytest.mark.parametrize(
    "own_line",
    ["Booked.", "Sent it over.", "Erledigt!", "Done: the signed contract", "- hire two engineers\n- move the launch"],
)
def test_a_short_sentence_or_item_after_sign_off_is_the_persons(own_line):
    body = f"The room is ours.\nThanks!\n\n{own_line}\n\nDan Okafor"
    assert _cleaned(body) == f"The room is ours.\nThanks!\n\n{own_line}"


POSTSCRIPT_IN_EACH_LANGUAGE = {
    "es_pd": ("Hasta el lunes.\nGracias!", "PD: Ya está reservado.", "Luis García"),
    "de_ps": ("Bis Montag.\nViele Grüße", "PS: Gebucht.", "Klaus Meier"),
    "fr_p_s": ("À lundi.\nMerci !", "P.-S. : C'est réservé.", "Marie Dupont"),
    "nl_nb": ("Tot maandag.\nGroeten", "NB: de zaal is geboekt.", "Jan de Vries"),
    "hu_ui": ("Hétfőn találkozunk.\nÜdvözlettel:", "Ui.: A termet lefoglaltam.", "Kiss Anna"),
    "ja_tsuishin": ("資料を添付します。\nよろしくお願いいたします。", "追伸：会議室を予約しました。", "佐藤"),
}


@pytest.mark.parametrize(
    ("text", "postscript", "name"), POSTSCRIPT_IN_EACH_LANGUAGE.values(), ids=POSTSCRIPT_IN_EACH_LANGUAGE
)
def test_a_postscript_after_sign_off_is_kept_in_each_language(text, postscript, name):
    body = f"{text}\n\n{postscript}\n\n{name}"
    assert _cleaned(body) == f"{text}\n\n{postscript}"


REAL_SIGNATURES = {
    "name_title_company_phone": (
        "The report is attached.",
        "Best regards,\nAlice Smith\nHead of Finance\nAcme Inc.\n+1 555 123 4567\nwww.acme.com",
    ),
    "a_dashed_name": ("The report is attached.", "Thanks\n-Abhishek Kona"),
    "a_phones_line": ("The report is attached.", "Thanks,\nDan\n\nSent from my iPhone"),
    "a_team_with_a_full_stop": ("Your account is ready.", "Sincerely,\n\nThe Google Apps Sync Team."),
    "french_lowercase_title": (
        "Le rapport est joint.",
        "Cordialement,\nMarie Dupont\nResponsable commerciale\nTél. 01 23 45 67 89",
    ),
    "polish_company": ("Raport w załączniku.", "Pozdrawiam,\nAnna Nowak\nACME Sp. z o.o."),
    "japanese_company": (
        "資料を添付します。",
        "よろしくお願いいたします。\n佐藤\n株式会社ABC 営業部\nTEL: 03-1234-5678",
    ),
}


@pytest.mark.parametrize(("text", "signature"), REAL_SIGNATURES.values(), ids=REAL_SIGNATURES)
def test_a_real_signature_after_sign_off_is_still_cut(text, signature):
    assert _cleaned(f"{text}\n\n{signature}") == text


FOOTERS = {
    "english_wrapped": (
        "CONFIDENTIALITY NOTICE: This e-mail message, including any attachments, is for the sole use of the\n"
        "intended recipient(s) and may contain confidential and privileged information. Any unauthorized\n"
        "review, use, disclosure or distribution is prohibited. If you are not the intended recipient,\n"
        "please contact the sender by reply e-mail and destroy all copies of the original message."
    ),
    "german": (
        "Diese E-Mail enthält vertrauliche Informationen. Wenn Sie nicht der richtige Adressat sind, "
        "informieren Sie bitte sofort den Absender und vernichten Sie diese Mail."
    ),
    "environment": "Please consider the environment before printing this email.",
}


@pytest.mark.parametrize("footer", FOOTERS.values(), ids=FOOTERS)
def test_a_confidentiality_footer_after_sign_off_is_cut_though_it_says_please(footer):
    text = "Hi Bob,\nThe signed lease is attached."
    assert _cleaned(f"{text}\n\nKind regards,\nAlice Smith\n\n{footer}") == text


def test_the_signature_and_footer_below_a_postscript_after_sign_off_are_cut():
    body = (
        "See you then.\nThanks!\n\nP.S. Booked.\n\nAlice Smith\nHead of Finance\nAcme Corp.\n+1 555 123 4567\n\n"
        f"{FOOTERS['english_wrapped']}"
    )
    assert _cleaned(body) == "See you then.\nThanks!\n\nP.S. Booked."


def test_a_persons_line_below_their_delivering_line_after_sign_off_is_kept():
    # Below a line of the person's, a short line is theirs unless it looks like a signature: "see the invite"
    # has a lowercase word no name holds.
    body = "See you then.\nThanks!\n\nBooked the room.\nsee the invite\n\nDan"
    assert _cleaned(body) == body


def test_a_persons_confidential_paragraph_after_sign_off_is_not_taken_for_a_footer():
    paragraph = "Please keep this email confidential, the deal is not public until Monday and the board has not signed."
    assert paragraph in _cleaned(f"Hi Bob,\nThanks!\n\n{paragraph}\n\nDan")


# Quote headers --------------------------------------------------------------------------------------------


def test_a_you_wrote_quote_header_without_an_address_cuts_the_unindented_quote():
    # crisp-oss/email-reply-parser's email_unquoted_reply, as published.
    assert _cleaned("This is my reply.\n\nOn Nov 26, 2013 you wrote:\n\nThis is my quote.") == "This is my reply."


@pytest.mark.parametrize(
    "header", ["On 26/11/2013 you wrote:", "On Tue, Nov 26, 2013 you wrote:", "On Nov 26, 2013, you wrote :"]
)
def test_a_you_wrote_quote_header_cuts_the_old_ask_below_it(header):
    body = f"The contract is signed.\n\n{header}\nCould you send me the signed contract by Friday?"
    assert _cleaned(body) == "The contract is signed."


LOOKS_LIKE_A_YOU_WROTE_QUOTE_HEADER = {
    "mid_sentence": "Hi Sam,\nOn Monday you wrote that the budget is final, but the numbers changed.\nCan you check?",
    "dated_mid_sentence": "Hi Sam,\nOn 24 Nov 2026 you wrote that the budget is final.\nCan you check them?",
    "not_a_date_before_you_wrote": (
        "Hi Sam,\nOn reflection, after 3 March I agree with what you wrote:\n- hire two engineers\nCan you check?"
    ),
    "no_date": "Hi Sam,\nOn Monday you wrote:\n- hire two engineers\nCan you check?",
}


@pytest.mark.parametrize("body", LOOKS_LIKE_A_YOU_WROTE_QUOTE_HEADER.values(), ids=LOOKS_LIKE_A_YOU_WROTE_QUOTE_HEADER)
def test_you_wrote_in_the_persons_text_is_no_quote_header(body):
    assert _cleaned(body) == body
