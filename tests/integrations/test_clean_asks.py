"""Cleaning never cuts an ask: sign-offs, signatures and quote headers are removed only where they are real.

Each case is an email whose ask must reach the prompt, and the parts of it (a real sign-off, signature or
quoted reply) that must not. The first group is the shapes seen cutting asks in real business mail; the
second has one email in each language of the reading-mail-well issue, where a sign-off word opens a
sentence with the ask, and a real sign-off and quote header follow.
"""

from __future__ import annotations

import pytest

from integrations.mail.clean import clean_body, detect_languages

SEEN_IN_REAL_MAIL = {
    "danish_tak_in_take": (
        "Hi Bob,\nThe contract is attached.\nTake a look and send me your comments by Friday\n"
        "Thanks,\nAlice Moore\nHead of Legal",
        ["Take a look and send me your comments by Friday"],
        ["Alice Moore", "Head of Legal"],
    ),
    "abbreviation_kh_in_khan": (
        "Hi team,\nQuick update on the Q3 close.\nKhan wants the numbers today\nCan you send yours by 3pm?\n\n"
        "Kind regards,\nMaria Lopez\nFinance | +44 20 7946 0958",
        ["Khan wants the numbers today", "Can you send yours by 3pm?"],
        ["Maria Lopez", "+44 20 7946 0958"],
    ),
    "swedish_slash_name_in_a_path": (
        "Hi,\nThe survey files are on the share:\n/West Delta/Louisiana, Timbalier Bay/2001/seismic\n"
        "Could you check whether the Timbalier Bay block is complete and tell me what is missing?\n\n"
        "On Mon, Nov 24, 2026 at 10:00 AM Carol Diaz <carol@example.com> wrote:\n> The files are uploaded.",
        [
            "/West Delta/Louisiana, Timbalier Bay/2001/seismic",
            "Could you check whether the Timbalier Bay block is complete and tell me what is missing?",
        ],
        ["The files are uploaded."],
    ),
    "thanks_then_the_ask": (
        "Hi Carol,\nI reviewed the lease.\nThanks, and please send the signed copy by Monday.\n\nBest,\nDan Okafor\n\n"
        "On Mon, Nov 24, 2026 at 10:00 AM Carol Diaz <carol@example.com> wrote:\n> Here is the lease.",
        ["Thanks, and please send the signed copy by Monday."],
        ["Dan Okafor", "Here is the lease."],
    ),
    "best_then_the_ask": (
        "Hello,\nBest, I think we should meet Tuesday to go over the budget.\nCan you book a room?\n\n"
        "Cheers,\nEve Ng\n\n-----Original Message-----\nFrom: Tom\nSent: Monday\nTo: Eve\nSubject: Budget\n\n"
        "Draft attached.",
        ["Best, I think we should meet Tuesday to go over the budget.", "Can you book a room?"],
        ["Eve Ng", "Draft attached."],
    ),
    "polish_data_line": (
        "Cześć,\nSpotkanie zarządu:\nData: 1 grudnia, godz. 10:00\nProszę przygotować prezentację na spotkanie.\n\n"
        "Pozdrawiam,\nAnna Nowak",
        ["Data: 1 grudnia, godz. 10:00", "Proszę przygotować prezentację na spotkanie."],
        ["Anna Nowak"],
    ),
    "polish_do_line": (
        "Hi Kim,\nFor tomorrow's visit:\nDo: send the slides to the client before noon.\n"
        "Don't: share the price list.\n\nThanks\nLee Park",
        ["Do: send the slides to the client before noon.", "Don't: share the price list."],
        ["Lee Park"],
    ),
    "italian_data_and_a_lines": (
        "Ciao a tutti,\nRiunione di progetto\nData: 1 dicembre, ore 10\nA: tutto il team\n"
        "Per favore confermate la presenza entro giovedì.\n\nCordiali saluti\nGiulia Rossi",
        ["Data: 1 dicembre, ore 10", "Per favore confermate la presenza entro giovedì."],
        ["Giulia Rossi"],
    ),
    "a_ps_after_the_signature": (
        "Hi Sam,\nThe offsite is confirmed.\n\nThanks,\nAlice Moore\n\nP.S. Can you bring the projector?",
        ["P.S. Can you bring the projector?"],
        [],
    ),
    "thanks_mid_text_and_a_real_signoff": (
        "Hi,\nThanks!\nAlso, could you send the invoice for October?\n\nBest regards,\nAlice Moore\nalice@example.com",
        ["Also, could you send the invoice for October?"],
        ["Alice Moore", "alice@example.com"],
    ),
    "swedish_slash_name_signoff": (
        "Hej,\nKan du skicka fakturan för oktober?\n/Anna",
        ["Kan du skicka fakturan för oktober?"],
        ["/Anna"],
    ),
}

IN_EACH_LANGUAGE = {
    "en": (
        "Hi John,\nThanks, and please send me the signed contract by Friday.\n\nKind regards,\nMary Smith\n\n"
        "On Mon, Nov 24, 2026 at 10:00 AM John <john@example.com> wrote:\n> Here is the contract.",
        ["Thanks, and please send me the signed contract by Friday."],
        ["Mary Smith", "Here is the contract."],
    ),
    "de": (
        "Hallo Jan,\nDanke, und bitte schick mir den unterschriebenen Vertrag bis Freitag.\n\nViele Grüße\n"
        "Klaus Meier\n\n"
        "Am Mo., 24. Nov. 2026 um 10:00 Uhr schrieb Jan <jan@example.de>:\n> Hier ist der Vertrag.",
        ["Danke, und bitte schick mir den unterschriebenen Vertrag bis Freitag."],
        ["Klaus Meier", "Hier ist der Vertrag."],
    ),
    "fr": (
        "Bonjour Paul,\nMerci, et pouvez-vous m'envoyer la facture signée avant lundi ?\n\nCordialement,\n"
        "Marie Dupont\n\nLe lun. 24 nov. 2026 à 10:00, Paul <paul@example.fr> a écrit :\n> Voici la facture.",
        ["Merci, et pouvez-vous m'envoyer la facture signée avant lundi ?"],
        ["Marie Dupont", "Voici la facture."],
    ),
    "es": (
        "Hola Ana,\nGracias, y por favor envíame el contrato firmado antes del viernes.\n\nUn saludo,\nLuis García\n\n"
        "El lun, 24 nov 2026 a las 10:00, Ana <ana@example.es> escribió:\n> Te mando el contrato.",
        ["Gracias, y por favor envíame el contrato firmado antes del viernes."],
        ["Luis García", "Te mando el contrato."],
    ),
    "it": (
        "Ciao Paolo,\nGrazie, e per favore mandami il contratto firmato entro venerdì.\n\nCordiali saluti\n"
        "Giulia Rossi\n\nDa: Paolo Bianchi\nInviato: lunedì 24 novembre 2026 10:00\nA: Giulia Rossi\n"
        "Oggetto: Contratto\n\nEcco il contratto.",
        ["Grazie, e per favore mandami il contratto firmato entro venerdì."],
        ["Giulia Rossi\n", "Ecco il contratto."],
    ),
    "pt": (
        "Olá Pedro,\nObrigado, e por favor envie-me o contrato assinado até sexta-feira.\n\nAtenciosamente,\n"
        "João Silva\n\nEm seg., 24 de nov. de 2026 às 10:00, Pedro <pedro@example.pt> escreveu:\n> Segue o contrato.",
        ["Obrigado, e por favor envie-me o contrato assinado até sexta-feira."],
        ["João Silva", "Segue o contrato."],
    ),
    "nl": (
        "Hoi Piet,\nBedankt, en kun je mij het getekende contract voor vrijdag sturen?\n\nMet vriendelijke groet,\n"
        "Jan de Vries\n\nOp ma 24 nov 2026 om 10:00 schreef Piet <piet@example.nl>:\n> Hier is het contract.",
        ["Bedankt, en kun je mij het getekende contract voor vrijdag sturen?"],
        ["Jan de Vries", "Hier is het contract."],
    ),
    "pl": (
        "Cześć Piotr,\nDziękuję, i proszę o przesłanie podpisanej umowy do piątku.\n\nPozdrawiam,\nAnna Nowak\n\n"
        "Od: Piotr Kowalski\nWysłano: poniedziałek, 24 listopada 2026 10:00\nDo: Anna Nowak\nTemat: Umowa\n\n"
        "W załączniku umowa.",
        ["Dziękuję, i proszę o przesłanie podpisanej umowy do piątku."],
        ["Pozdrawiam", "W załączniku umowa."],
    ),
    "sv": (
        "Hej Per,\nTack, och skicka gärna det signerade avtalet före fredag.\n\nMed vänliga hälsningar\n"
        "Anna Svensson\n\nDen mån 24 nov. 2026 kl 10:00 skrev Per <per@example.se>:\n> Här är avtalet.",
        ["Tack, och skicka gärna det signerade avtalet före fredag."],
        ["Anna Svensson", "Här är avtalet."],
    ),
    "fi": (
        "Hei Pekka,\nKiitos, ja lähetä minulle allekirjoitettu sopimus perjantaihin mennessä.\n\n"
        "Ystävällisin terveisin\nMatti Virtanen\n\nma 24.11.2026 klo 10.00 Pekka <pekka@example.fi> kirjoitti:\n"
        "> Tässä sopimus.",
        ["Kiitos, ja lähetä minulle allekirjoitettu sopimus perjantaihin mennessä."],
        ["Matti Virtanen", "Tässä sopimus."],
    ),
    "hu": (
        "Szia Péter,\nKöszönöm, és kérlek, küldd el az aláírt szerződést péntekig.\n\nÜdvözlettel:\nKiss Anna\n\n"
        "Péter <peter@example.hu> ezt írta (időpont: 2026. nov. 24., H, 10:00):\n> Csatolom a szerződést.",
        ["Köszönöm, és kérlek, küldd el az aláírt szerződést péntekig."],
        ["Kiss Anna", "Csatolom a szerződést."],
    ),
    "ja": (
        "山田様\nお世話になっております。\nありがとうございます、見積書を金曜日までに送ってください。\n"
        "よろしくお願いいたします。\n佐藤\n\n2026年11月24日(月) 10:00 山田太郎 <taro@example.jp>:\n> 見積書の件です。",
        ["ありがとうございます、見積書を金曜日までに送ってください。"],
        ["佐藤", "見積書の件です。"],
    ),
}


# Lines that look like a quote header in some language, in mail whose asks follow them: headers are looked
# for in every language at once, so each must look like a header as a whole.
LOOKS_LIKE_A_QUOTE_HEADER = {
    "polish_from_to_dates": "Cześć,\nUrlop:\nOd: 1 grudnia\nDo: 5 grudnia\nTemat: wyjazd\nProszę zarezerwować hotel.",
    "spanish_from_to_days": "Hola,\nTurnos de la semana:\nDe: lunes\nA: viernes\n¿Puedes cubrir el turno del martes?",
    "a_form_to_fill_in": "Please file the ticket with:\nSubject: Q3 report\nTo: finance@example.com\nand copy me.",
    "an_english_line_with_wrote": "In 2024 the auditor wrote:\nthe numbers are fine.\nCan you check them again?",
    "a_japanese_dated_heading": "2026年12月1日の会議:\n資料を金曜日までに送ってください。",
    "a_quoted_line_introduced_by_the_person": "Can you check what Carol wrote on 24 Nov?\n> The figures are final.",
    "a_forward_phrase_without_a_header": "Begin forwarded message:\nPlease read it and tell me what you think.",
}


@pytest.mark.parametrize("body", LOOKS_LIKE_A_QUOTE_HEADER.values(), ids=LOOKS_LIKE_A_QUOTE_HEADER)
def test_a_line_that_only_looks_like_a_quote_header_cuts_nothing(body):
    own_lines = [line for line in body.splitlines() if not line.startswith(">")]
    cleaned = clean_body(body, max_chars=4_000)
    assert cleaned.splitlines() == own_lines


@pytest.mark.parametrize(
    "header",
    [
        "W dniu 24.11.2026 o 10:00 Jan Kowalski <jan@example.pl> napisał(a):",
        "ma 24.11.2026 klo 10.00 Pekka <pekka@example.fi> kirjoitti:",
        "Péter <peter@example.hu> ezt írta (időpont: 2026. nov. 24., H, 10:00):",
        "24 nov. 2026 kl. 10:00 skrev Per <per@example.se>:",
        "On 24/11/2026 10:00, Carol wrote",
    ],
)
def test_the_line_just_above_a_quote_header_stays_the_persons(header):
    # Gmail wraps a long header over two lines, so two lines are tried together: never the person's line with
    # the header under it.
    body = f"Can you send the minutes by Friday\n{header}\n> The meeting went well."
    assert clean_body(body, max_chars=4_000) == "Can you send the minutes by Friday"


def test_a_line_that_asks_is_never_taken_for_the_attribution_of_the_quote_below_it():
    body = "Please write to Carol <carol@example.com> by 24 Nov\n> Who has the contract?"
    assert clean_body(body, max_chars=4_000) == "Please write to Carol <carol@example.com> by 24 Nov"


@pytest.mark.parametrize(
    ("body", "asks", "removed"),
    [*SEEN_IN_REAL_MAIL.values(), *IN_EACH_LANGUAGE.values()],
    ids=[*SEEN_IN_REAL_MAIL, *IN_EACH_LANGUAGE],
)
def test_the_ask_survives_and_the_sign_off_and_quote_do_not(body, asks, removed):
    cleaned = clean_body(body, max_chars=4_000)
    for ask in asks:
        assert ask in cleaned
    for part in removed:
        assert part not in cleaned + "\n"


@pytest.mark.parametrize("language", ["da", "sv", "pl", "it"])
def test_the_asks_survive_whatever_the_languages_chosen(language):
    # Choosing a language must never bring back the cross-language matches (Danish "Tak", Swedish "/Name",
    # Polish "Data:"/"Do:").
    for body, asks, _removed in SEEN_IN_REAL_MAIL.values():
        cleaned = clean_body(body, max_chars=4_000, languages=[language])
        assert all(ask in cleaned for ask in asks), body


def test_a_long_text_after_a_dash_line_is_kept_when_it_asks():
    body = (
        "Agenda for Monday\n--\nPlease review the attached contract and sign it by Friday.\n"
        "Also book the meeting room for the signing, and tell Legal which day suits us."
    )
    assert clean_body(body, max_chars=4_000) == body


def test_a_short_signature_after_a_dash_line_is_removed_even_with_a_footer_request():
    body = (
        "Hi Bob,\nThe budget for next year is attached, with the changes we discussed on Tuesday.\n"
        "Could you review the travel lines and tell me by Thursday whether they match your plan?\n"
        "--\nAlice\nPlease consider the environment."
    )
    assert clean_body(body, max_chars=4_000).endswith("whether they match your plan?")


def test_a_header_in_the_senders_client_language_is_found_under_an_english_text():
    body = "Could you send me the figures?\n\nVon: Paul\nGesendet: Montag\nAn: Eva\nBetreff: Zahlen\n\nAnbei."
    assert clean_body(body, max_chars=4_000) == "Could you send me the figures?"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Kannst du mir bitte den Bericht für das dritte Quartal bis Freitag schicken?", ("de",)),
        ("Pourriez-vous m'envoyer le rapport du troisième trimestre avant vendredi ?", ("fr",)),
        ("金曜日までに報告書を送ってください。", ("ja",)),
    ],
)
def test_a_confident_language_is_the_only_one_detected(text, expected):
    assert detect_languages(text) == expected


def test_a_short_email_gets_several_plausible_languages():
    languages = detect_languages("Danke!\nAnna")
    assert "de" in languages
    assert len(languages) > 1
