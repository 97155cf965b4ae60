"""HTML quotes go before the HTML is turned into text; what the person wrote, and a bare forward, stay.

The shapes of each client are fixtures (tests/fixtures/mail/html-*); these are the decisions around them.
"""

from __future__ import annotations

from integrations.mail.clean import clean_body
from integrations.mail.mime import html_to_text


def _prompt_text(html: str) -> str:
    return clean_body(html_to_text(html), max_chars=4_000)


def test_a_bare_apple_mail_forward_keeps_the_forwarded_text():
    html = (
        '<html><body><div><br><div><br><blockquote type="cite"><div>Begin forwarded message:</div>'
        '<br class="Apple-interchange-newline"><div><span><b>From: </b></span><span>Carol Diaz &lt;carol@example.com'
        "&gt;</span></div><div><span><b>Subject: </b></span><span>Invoice</span></div><div><span><b>Date: </b>"
        "</span><span>24 November 2026 at 10:00:00 CET</span></div><div><span><b>To: </b></span><span>Dan</span>"
        "</div><br><div>Please pay the invoice by Friday.</div></blockquote></div></div></body></html>"
    )
    assert _prompt_text(html) == "Please pay the invoice by Friday."


def test_a_bare_outlook_forward_keeps_the_forwarded_text():
    html = (
        '<html><body><div id="appendonsend"></div><hr style="display:inline-block;width:98%">'
        '<div id="divRplyFwdMsg" dir="ltr"><b>From:</b> Carol Diaz &lt;carol@example.com&gt;<br><b>Sent:</b> '
        "Monday, November 24, 2026 10:00<br><b>To:</b> Dan<br><b>Subject:</b> Invoice</div>"
        "<div>Please pay the invoice by Friday.</div></body></html>"
    )
    assert _prompt_text(html) == "Please pay the invoice by Friday."


def test_a_bare_gmail_forward_keeps_the_forwarded_text():
    html = (
        '<div dir="ltr"><br><div class="gmail_quote"><div dir="ltr" class="gmail_attr">---------- Forwarded message'
        " ---------<br>From: Carol Diaz &lt;carol@example.com&gt;<br>Date: Mon, Nov 24, 2026 at 10:00 AM<br>"
        "Subject: Invoice<br>To: Dan &lt;dan@example.com&gt;<br></div><br><br>"
        '<div dir="ltr">Please pay the invoice by Friday.</div></div></div>'
    )
    assert _prompt_text(html) == "Please pay the invoice by Friday."


def test_gmail_indent_is_the_persons_own_text_not_a_quote():
    html = (
        '<div dir="ltr">Hi Dan,<div><br></div><blockquote style="margin:0 0 0 40px;border:none;padding:0px">'
        "<div>Please send the signed lease by Monday.</div></blockquote></div>"
    )
    assert _prompt_text(html) == "Hi Dan,\n\nPlease send the signed lease by Monday."


def test_text_typed_inside_a_quote_is_taken_as_quoted_history():
    # Apple Mail keeps what the person types inside a quote in the quote's markup; nothing tells it apart.
    html = (
        'Thanks, see below.<br><blockquote type="cite"><div>Can you come on Tuesday?</div>'
        "<div>Yes, I can.</div></blockquote>"
    )
    assert _prompt_text(html) == "Thanks, see below."


def test_an_apple_mail_attribution_as_bare_text_goes_with_its_quote():
    html = (
        "Tuesday works. Can you book the room?<br><br>On 24 Nov 2026, at 10:00, Carol Diaz &lt;carol@example.com&gt;"
        ' wrote:<br><br><blockquote type="cite">When are you available?</blockquote>'
    )
    assert _prompt_text(html) == "Tuesday works. Can you book the room?"


def test_a_signature_box_with_a_top_border_is_not_taken_for_outlooks_header():
    html = (
        "<p>Please approve the order.</p>"
        '<div style="border:none;border-top:solid #1F4E79 1.0pt;padding:3.0pt 0cm 0cm 0cm">'
        "<p>Anna Lee | Procurement</p></div><p>P.S. Could you also book the van?</p>"
    )
    assert "Could you also book the van?" in _prompt_text(html)


def test_numbered_and_dashed_lines_are_not_escaped_as_markdown():
    html = "<div>1. Send the report.</div><div>- Book the room.</div><div>+ Call Ana.</div>"
    assert html_to_text(html) == "1. Send the report.\n\n- Book the room.\n\n+ Call Ana."


def test_outlooks_french_header_box_with_envoye_le_goes_with_the_old_ask():
    html = (
        "<div><p>Bonjour Carol,</p><p>Le contrat est signé.</p></div>"
        '<div style="border:none;border-top:solid #E1E1E1 1.0pt;padding:3.0pt 0cm 0cm 0cm">'
        "<p><b>De :</b> Carol Diaz &lt;carol@example.fr&gt;<br><b>Envoyé le :</b> lundi 24 novembre 2026 10:00<br>"
        "<b>À :</b> Dan Okafor &lt;dan@example.fr&gt;<br><b>Objet :</b> Contrat</p></div>"
        "<p>Pourriez-vous m'envoyer le contrat signé avant vendredi ?</p>"
    )
    assert _prompt_text(html) == "Bonjour Carol,\n\nLe contrat est signé."
