"""An old ask under a quote header never reaches the prompt again; a line that only looks like a header cuts nothing.

Each reply below is the person's new text above a quote header of a form seen on public reply corpora (the
crisp-oss/email-reply-parser fixtures, kept whole under tests/fixtures/mail/crisp/), with the earlier email
under it holding an old ask. The quote is not marked with ">" lines, as the clients (or the HTML turned into
text) deliver it: only the header says where the earlier email starts. What must reach the prompt is exactly
the person's new text.
"""

# ruff: noqa: RUF001  (Russian headers are written in Cyrillic, whose letters look like Latin ones)
from __future__ import annotations

import pytest

from integrations.mail.clean import clean_body

OLD_ASK = "Could you send me the signed contract by Friday?"
NEW_TEXT = "Hi Carol,\n\nThe contract is signed and attached.\nCan we meet on Tuesday at 10 to go over the invoice?"

UNDER_EACH_HEADER = {
    "lowercase_original_message": f"-----original message-----\n\nHi Dan,\n\n{OLD_ASK}",
    "spaced_original_message": f"----- Original Message -----\n\nHi Dan,\n\n{OLD_ASK}",
    "spaced_original_message_then_fields": (
        "----- Original Message -----\nFrom: Carol Diaz <carol@example.com>\nTo: Dan Okafor <dan@example.com>\n"
        f"Sent: Monday, November 24, 2026 10:00 AM\nSubject: Contract\n\n{OLD_ASK}"
    ),
    "french_outlook_envoye_le": (
        "De : Carol Diaz <carol@example.fr>\nEnvoyé le : lundi 24 novembre 2026 10:00\n"
        f"À : Dan Okafor <dan@example.fr>\nObjet : Contrat\n\nBonjour Dan,\n{OLD_ASK}"
    ),
    "french_webmail_message_du": (
        '====\n\nMessage du : 24/11/2026 10:00\nDe : "Carol Diaz " <carol@example.fr>\nA : dan@example.fr\n'
        f"Copie à : \nSujet : Contrat\n\n{OLD_ASK}"
    ),
    "danish_oprindelig_besked": (
        "-------- Oprindelig besked --------\nFra: Carol Diaz <carol@example.dk>\nDato: 24.11.2026 10.00 (GMT+01:00)\n"
        f"Til: dan@example.dk\nEmne: Kontrakt\n\n{OLD_ASK}"
    ),
    "danish_outlook_block": (
        "Fra: Carol Diaz <carol@example.dk>\nSendt: 24. november 2026 10:00\nTil: Dan Okafor <dan@example.dk>\n"
        f"Emne: Kontrakt\n\n{OLD_ASK}"
    ),
    "wrote_without_a_colon": f"On Mon, 24 Nov 2026 10:00:00 +0100 Carol Diaz <carol@example.com> wrote\n\n{OLD_ASK}",
    "yandex_date_name_address": f'24.11.2026, 10.00, "Carol Diaz" <carol@example.com>:\n\n{OLD_ASK}',
    "yandex_time_first": f'10:00 AM, November 24, 2026, "Carol - Acme" <carol@mail.acme.com>:\n\n{OLD_ASK}',
    "mail_ru_from": (
        f"Monday, 24 November 2026, 10:00 AM +0300 from carol@mail.acme.com <carol@mail.acme.com>:\n\n{OLD_ASK}"
    ),
    "gmail_iso_date": f"2026-11-24 10:00 GMT+01:00 Carol Diaz <carol@example.com>:\n\n{OLD_ASK}",
    "russian_gmail": f"пн, 24 нояб. 2026 г. в 10:00, Carol Diaz <carol@example.com>:\n\n{OLD_ASK}",
    "russian_outlook": (
        "От: Carol Diaz <carol@example.ru>\nОтправлено: понедельник, 24 ноября 2026 г. 10:00\n"
        f"Кому: Dan Okafor <dan@example.ru>\nТема: Договор\n\n{OLD_ASK}"
    ),
    "russian_original_message": (
        "-----Исходное сообщение-----\nОт: Carol Diaz <carol@example.ru>\nОтправлено: 24 ноября 2026 г. 10:00\n"
        f"Кому: dan@example.ru\nТема: Договор\n\n{OLD_ASK}"
    ),
    "russian_thunderbird": f"24.11.2026 10:00, Carol Diaz <carol@example.ru> пишет:\n\n{OLD_ASK}",
    "zoho_dashed_wrote": f"---- On Mon, 24 Nov 2026 10:00:00 +0100 carol@example.com wrote ----\n\n{OLD_ASK}",
    "italian_in_data": f'In data 24 novembre 2026 10:00:00 "Carol Diaz" <carol@example.it> ha scritto:\n\n{OLD_ASK}',
    "split_over_three_lines": f"On Nov 24, 2026, at 10:00 AM, Carol Diaz\n<carol@example.com>\nwrote:\n\n> {OLD_ASK}",
    "split_over_three_lines_unquoted": (
        f"On Nov 24, 2026, at 10:00 AM, Carol Diaz\n<carol@example.com>\nwrote:\n\n{OLD_ASK}"
    ),
    "split_after_an_open_bracket": (
        f"On Mon, Nov 24, 2026 at 10:00 AM Carol Diaz <\ncarol.diaz+1234556@example.com> wrote:\n\n> {OLD_ASK}"
    ),
    "split_after_a_dated_day": (f"Carol Diaz <carol@example.de> schrieb am Mo., 24.\nNov. 2026, 10:00:\n\n> {OLD_ASK}"),
}


@pytest.mark.parametrize("quoted", UNDER_EACH_HEADER.values(), ids=UNDER_EACH_HEADER)
def test_the_old_ask_under_the_header_is_gone_and_the_new_text_stays_whole(quoted):
    cleaned = clean_body(f"{NEW_TEXT}\n\n{quoted}", max_chars=4_000)
    assert OLD_ASK not in cleaned
    assert cleaned == NEW_TEXT


# Text of the person's own that looks like part of a header, with nothing quoted after it: nothing is cut.
LOOKS_LIKE_A_HEADER = {
    "on_monday_we_wrote_the_plan": (
        "Hi team,\nOn Monday we wrote the plan:\n- hire two engineers\n- move the launch to March\n"
        "Can you each review it by Friday?"
    ),
    "on_a_date_we_wrote": (
        "Hi team,\nOn 3 March 2026 we wrote:\n- hire two engineers\n- move the launch to March\n"
        "Can you each review it by Friday?"
    ),
    "a_dated_line_ending_with_a_colon": (
        "Hi Sam,\nThe schedule for 24.11.2026, 10:00 at the Berlin office:\nCan you book the room and order lunch?"
    ),
    "a_meeting_with_an_address_and_a_colon": (
        "Hi Sam,\nMeeting at 10:00 with Carol <carol@example.com>:\nPlease prepare the Q3 numbers."
    ),
    "a_dated_meeting_with_an_address_and_a_colon": (
        "Hi Sam,\nMeeting on 24.11.2026 at 10:00 with Carol <carol@example.com>:\n- the budget\n- the hires\n"
        "Please prepare the Q3 numbers."
    ),
    "a_dashed_heading": "Hi Sam,\n---- Agenda for 24 Nov ----\nBudget, hires, launch.\nCan you send the slides?",
    "a_dashed_original_message_line_in_a_sentence": (
        "Hi Sam,\nPlease forward the original message to Legal, not a copy.\nThanks for checking."
    ),
    "a_line_about_what_someone_wrote": (
        "Hi Sam,\nOn 24 Nov Carol wrote the minutes\nand they are on the share.\nCan you check them?"
    ),
    "a_russian_from_to_line": "Привет,\nОт: 1 декабря\nДо: 5 декабря\nТема: отпуск\nПожалуйста, закажи отель.",
}


@pytest.mark.parametrize("body", LOOKS_LIKE_A_HEADER.values(), ids=LOOKS_LIKE_A_HEADER)
def test_text_that_only_looks_like_a_header_is_kept_whole(body):
    assert clean_body(body, max_chars=4_000) == body


def test_a_long_list_of_short_lines_is_cleaned_not_a_crash():
    # Each line without a full stop may be the first part of a wrapped header; looking for one line after the
    # next went one call deeper per line: a pasted list of a thousand items raised RecursionError while its
    # batch's prompt was built, and every run stopped there (internal_error), its mailbox read no further.
    body = "Can you ship these by Friday?\n" + "\n".join(f"#{1000 + item} 10 pcs" for item in range(1500))
    cleaned = clean_body(body, max_chars=4_000)
    assert cleaned.startswith("Can you ship these by Friday?\n#1000 10 pcs\n#1001 10 pcs")
