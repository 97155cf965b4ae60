"""A labelled mixed inbox for `benchmarks/tokens.py`: what a person's mail looks like, with its asks marked.

Every sentence in `asks` was written by hand as an ask of the email it is in, and is an exact substring of
that email's text. Everything else in an email asks nothing of the reader now: greetings, context, sign-offs
and signatures, and quoted history (an old ask in a quote was read when that mail arrived). `secrets` are the
strings that should never reach an LLM (one-time codes, passwords, card numbers and codes, IBANs, keys and
tokens; card numbers pass Luhn and IBANs their check digits, as real ones do).

Each email also carries what its provider gives the bulk rule (`integrations.mail.bulk`): the few headers
that say list, bulk or automatic mail, as the sender's software writes them, and the provider's sorting
(Gmail's category, or Outlook's Focused/Other, which makes it an Outlook email). `bulk` marks mail that asks
nothing and that a machine sent: skipping it loses nothing, reading it costs tokens.

The replies are built from hand-written parts in twelve languages (greeting, context, asks, sign-off,
signature, quote header and quoted text), combined in every shape a client produces: a sign-off with or
without contact lines, a "--" signature, a phone's "Sent from" line; a "wrote:" header with ">" quotes, an
Outlook header block, an "Original Message" separator, or no quote. Some replies open a line with a sign-off
word that carries the ask ("Thanks, and please …"), the shape that used to cut asks. The rest is written out
one by one: the shapes seen cutting asks in real mail, HTML mail, newsletters, notifications, receipts,
transactional mail that asks something (bills, forms to sign) and mail carrying secrets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stdnum import iban, luhn


@dataclass(frozen=True)
class LabelledEmail:
    kind: str  # reply | shape | html | newsletter | notification | receipt | transactional | secret
    language: str
    sender: str
    subject: str
    text: str  # the plain-text body, or "" for HTML mail
    html: str = ""  # the HTML body as delivered, for HTML mail
    asks: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    bulk: bool = False  # asks nothing and a machine sent it: skipping it loses nothing
    # The bulk rule's headers (List-Unsubscribe, List-Id, Precedence, Auto-Submitted) as sent.
    headers: dict[str, str] = field(default_factory=dict, hash=False)
    # Gmail's category ("personal" is Primary) or Outlook's "focused"/"other"; "" when none.
    category: str = "personal"

    @property
    def provider(self) -> str:
        return "outlook" if self.category in ("focused", "other") else "gmail"


# Headers as the senders' software writes them.
_MAILCHIMP = {
    "List-Unsubscribe": "<https://shop.list-manage.example/unsubscribe?u=4f2&id=9a1>, <mailto:unsub@mc.example>",
    "List-Id": "<4f2a9b1c.shop.list-id.mcsv.example>",
    "Precedence": "bulk",
}
_GITHUB = {
    "List-ID": "acme/app <app.acme.github.example>",
    "List-Unsubscribe": "<mailto:unsub+abc@reply.github.example>, <https://github.example/notifications/unsubscribe>",
}
_JIRA = {"Auto-Submitted": "auto-generated", "Precedence": "bulk"}
_MAILING_SERVICE = {"List-Unsubscribe": "<https://u123.ct.sendgrid.example/asm/unsubscribe/?user_id=123>"}
_AUTOMATIC = {"Auto-Submitted": "auto-generated"}


@dataclass(frozen=True)
class _Language:
    hello: str
    context: tuple[str, str]
    asks: tuple[str, str, str]
    mixed: str  # a sign-off word that opens an ask
    signoffs: tuple[str, str]
    name: str
    title: str
    wrote: str
    outlook: str
    quoted: str
    mobile: str


_LANGUAGES: dict[str, _Language] = {
    "en": _Language(
        "Hi John,",
        ("I went through the draft you sent on Monday.", "The numbers for the third quarter look close to the plan."),
        (
            "Could you send me the final version by Friday?",
            "Please book a meeting room for Tuesday afternoon.",
            "Take a look at the attached budget and send me your comments by Thursday.",
        ),
        "Thanks, and please forward the signed copy to the auditors.",
        ("Best regards,", "Thanks,"),
        "Mary Smith",
        "Head of Finance",
        "On Mon, Nov 24, 2026 at 10:00 AM John Carter <john@example.com> wrote:",
        "From: John Carter <john@example.com>\nSent: Monday, November 24, 2026 10:00 AM\nTo: Mary Smith\n"
        "Subject: Budget",
        "Here is the draft. Can you check the travel lines?",
        "Sent from my iPhone",
    ),
    "de": _Language(
        "Hallo Jan,",
        ("Ich habe den Entwurf vom Montag durchgesehen.", "Die Zahlen für das dritte Quartal liegen nah am Plan."),
        (
            "Kannst du mir die endgültige Fassung bis Freitag schicken?",
            "Bitte buche einen Besprechungsraum für Dienstagnachmittag.",
            "Schau dir bitte das Budget im Anhang an und schick mir deine Anmerkungen bis Donnerstag.",
        ),
        "Danke, und bitte leite die unterschriebene Kopie an die Prüfer weiter.",
        ("Viele Grüße", "Mit freundlichen Grüßen"),
        "Klaus Meier",
        "Leiter Finanzen",
        "Am Mo., 24. Nov. 2026 um 10:00 Uhr schrieb Jan Becker <jan@example.de>:",
        "Von: Jan Becker <jan@example.de>\nGesendet: Montag, 24. November 2026 10:00\nAn: Klaus Meier\nBetreff: Budget",
        "Hier ist der Entwurf. Kannst du die Reisekosten prüfen?",
        "Von meinem iPhone gesendet",
    ),
    "fr": _Language(
        "Bonjour Paul,",
        ("J'ai relu le projet envoyé lundi.", "Les chiffres du troisième trimestre sont proches du plan."),
        (
            "Pourriez-vous m'envoyer la version finale d'ici vendredi ?",
            "Merci de réserver une salle de réunion pour mardi après-midi.",
            "Veuillez relire le budget joint et m'envoyer vos remarques avant jeudi.",
        ),
        "Merci, et pouvez-vous transmettre la copie signée aux auditeurs ?",
        ("Cordialement,", "Bien à vous,"),
        "Marie Dupont",
        "Directrice financière",
        "Le lun. 24 nov. 2026 à 10:00, Paul Martin <paul@example.fr> a écrit :",
        "De : Paul Martin <paul@example.fr>\nEnvoyé : lundi 24 novembre 2026 10:00\nÀ : Marie Dupont\nObjet : Budget",
        "Voici le projet. Pouvez-vous vérifier les frais de déplacement ?",
        "Envoyé de mon iPhone",
    ),
    "es": _Language(
        "Hola Ana,",
        ("He revisado el borrador que enviaste el lunes.", "Las cifras del tercer trimestre están cerca del plan."),
        (
            "¿Puedes enviarme la versión final antes del viernes?",
            "Por favor, reserva una sala de reuniones para el martes por la tarde.",
            "Revisa el presupuesto adjunto y envíame tus comentarios antes del jueves, por favor.",
        ),
        "Gracias, y por favor envía la copia firmada a los auditores.",
        ("Un saludo,", "Atentamente,"),
        "Luis García",
        "Director financiero",
        "El lun, 24 nov 2026 a las 10:00, Ana López <ana@example.es> escribió:",
        "De: Ana López <ana@example.es>\nEnviado: lunes, 24 de noviembre de 2026 10:00\nPara: Luis García\n"
        "Asunto: Presupuesto",
        "Aquí está el borrador. ¿Puedes revisar los gastos de viaje?",
        "Enviado desde mi iPhone",
    ),
    "it": _Language(
        "Ciao Paolo,",
        ("Ho letto la bozza che hai mandato lunedì.", "I numeri del terzo trimestre sono vicini al piano."),
        (
            "Puoi mandarmi la versione finale entro venerdì?",
            "Per favore prenota una sala riunioni per martedì pomeriggio.",
            "Dai un'occhiata al budget allegato e mandami i tuoi commenti entro giovedì, per favore.",
        ),
        "Grazie, e per favore inoltra la copia firmata ai revisori.",
        ("Cordiali saluti", "Un saluto,"),
        "Giulia Rossi",
        "Responsabile amministrativa",
        "Il giorno lun 24 nov 2026 alle ore 10:00 Paolo Bianchi <paolo@example.it> ha scritto:",
        "Da: Paolo Bianchi <paolo@example.it>\nInviato: lunedì 24 novembre 2026 10:00\nA: Giulia Rossi\n"
        "Oggetto: Budget",
        "Ecco la bozza. Puoi controllare le spese di viaggio?",
        "Inviato da iPhone",
    ),
    "pt": _Language(
        "Olá Pedro,",
        ("Revi o rascunho que enviaste na segunda-feira.", "Os números do terceiro trimestre estão perto do plano."),
        (
            "Podes enviar-me a versão final até sexta-feira?",
            "Por favor, reserva uma sala de reuniões para terça à tarde.",
            "Vê o orçamento em anexo e envia-me os teus comentários até quinta-feira, por favor.",
        ),
        "Obrigado, e por favor envia a cópia assinada aos auditores.",
        ("Atenciosamente,", "Cumprimentos,"),
        "João Silva",
        "Diretor financeiro",
        "Em seg., 24 de nov. de 2026 às 10:00, Pedro Costa <pedro@example.pt> escreveu:",
        "De: Pedro Costa <pedro@example.pt>\nEnviado: segunda-feira, 24 de novembro de 2026 10:00\n"
        "Para: João Silva\nAssunto: Orçamento",
        "Segue o rascunho. Podes verificar as despesas de viagem?",
        "Enviado do meu iPhone",
    ),
    "nl": _Language(
        "Hoi Piet,",
        (
            "Ik heb het concept van maandag doorgenomen.",
            "De cijfers voor het derde kwartaal liggen dicht bij het plan.",
        ),
        (
            "Kun je mij de definitieve versie voor vrijdag sturen?",
            "Wil je alsjeblieft een vergaderzaal reserveren voor dinsdagmiddag?",
            "Bekijk het bijgevoegde budget en stuur mij je opmerkingen voor donderdag.",
        ),
        "Bedankt, en stuur de getekende kopie alsjeblieft door naar de accountants.",
        ("Met vriendelijke groet,", "Groeten,"),
        "Jan de Vries",
        "Hoofd financiën",
        "Op ma 24 nov 2026 om 10:00 schreef Piet Jansen <piet@example.nl>:",
        "Van: Piet Jansen <piet@example.nl>\nVerzonden: maandag 24 november 2026 10:00\nAan: Jan de Vries\n"
        "Onderwerp: Budget",
        "Hier is het concept. Kun je de reiskosten controleren?",
        "Verzonden vanaf mijn iPhone",
    ),
    "pl": _Language(
        "Cześć Piotr,",
        ("Przejrzałam szkic wysłany w poniedziałek.", "Liczby za trzeci kwartał są bliskie planu."),
        (
            "Czy możesz przesłać mi ostateczną wersję do piątku?",
            "Proszę zarezerwować salę konferencyjną na wtorek po południu.",
            "Przejrzyj załączony budżet i wyślij mi swoje uwagi do czwartku.",
        ),
        "Dziękuję, i proszę przekazać podpisaną kopię audytorom.",
        ("Pozdrawiam,", "Z poważaniem,"),
        "Anna Nowak",
        "Dyrektor finansowa",
        "pon., 24 lis 2026 o 10:00 Piotr Kowalski <piotr@example.pl> napisał(a):",
        "Od: Piotr Kowalski <piotr@example.pl>\nWysłano: poniedziałek, 24 listopada 2026 10:00\nDo: Anna Nowak\n"
        "Temat: Budżet",
        "Oto szkic. Czy możesz sprawdzić koszty podróży?",
        "Wysłano z iPhone'a",
    ),
    "sv": _Language(
        "Hej Per,",
        ("Jag har gått igenom utkastet från i måndags.", "Siffrorna för tredje kvartalet ligger nära planen."),
        (
            "Kan du skicka den slutliga versionen till mig före fredag?",
            "Boka gärna ett mötesrum till tisdag eftermiddag.",
            "Titta på den bifogade budgeten och skicka dina kommentarer före torsdag.",
        ),
        "Tack, och skicka gärna den signerade kopian till revisorerna.",
        ("Med vänliga hälsningar", "Hälsningar"),
        "Anna Svensson",
        "Ekonomichef",
        "Den mån 24 nov. 2026 kl 10:00 skrev Per Lind <per@example.se>:",
        "Från: Per Lind <per@example.se>\nSkickat: den 24 november 2026 10:00\nTill: Anna Svensson\nÄmne: Budget",
        "Här är utkastet. Kan du kontrollera resekostnaderna?",
        "Skickat från min iPhone",
    ),
    "fi": _Language(
        "Hei Pekka,",
        ("Kävin läpi maanantaina lähettämäsi luonnoksen.", "Kolmannen neljänneksen luvut ovat lähellä suunnitelmaa."),
        (
            "Voitko lähettää minulle lopullisen version perjantaihin mennessä?",
            "Varaa ole hyvä neuvotteluhuone tiistai-iltapäiväksi.",
            "Katso liitteenä oleva budjetti ja lähetä kommenttisi torstaihin mennessä.",
        ),
        "Kiitos, ja lähetä allekirjoitettu kopio tilintarkastajille.",
        ("Ystävällisin terveisin", "Terveisin"),
        "Matti Virtanen",
        "Talousjohtaja",
        "ma 24.11.2026 klo 10.00 Pekka Korhonen <pekka@example.fi> kirjoitti:",
        "Lähettäjä: Pekka Korhonen <pekka@example.fi>\nLähetetty: maanantai 24. marraskuuta 2026 10.00\n"
        "Vastaanottaja: Matti Virtanen\nAihe: Budjetti",
        "Tässä luonnos. Voitko tarkistaa matkakulut?",
        "Lähetetty iPhonesta",
    ),
    "hu": _Language(
        "Szia Péter,",
        ("Átnéztem a hétfőn küldött tervezetet.", "A harmadik negyedév számai közel vannak a tervhez."),
        (
            "Elküldenéd a végleges változatot péntekig?",
            "Kérlek, foglalj egy tárgyalót kedd délutánra.",
            "Nézd át a csatolt költségvetést, és küldd el a megjegyzéseidet csütörtökig.",
        ),
        "Köszönöm, és kérlek, küldd el az aláírt példányt a könyvvizsgálóknak.",
        ("Üdvözlettel:", "Köszönettel:"),
        "Kiss Anna",
        "Pénzügyi vezető",
        "Nagy Péter <peter@example.hu> ezt írta (időpont: 2026. nov. 24., H, 10:00):",
        "Feladó: Nagy Péter <peter@example.hu>\nKüldve: 2026. november 24., hétfő 10:00\nCímzett: Kiss Anna\n"
        "Tárgy: Költségvetés",
        "Itt a tervezet. Át tudnád nézni az utazási költségeket?",
        "iPhone-ról küldve",
    ),
    "ja": _Language(
        "山田様",
        ("月曜日にいただいた草案を拝見しました。", "第3四半期の数字は計画に近いです。"),
        (
            "最終版を金曜日までに送っていただけますか？",  # noqa: RUF001
            "火曜日の午後に会議室を予約してください。",
            "添付の予算をご確認のうえ、木曜日までにコメントをお送りください。",
        ),
        "ありがとうございます、署名済みの写しを監査人に転送してください。",
        ("よろしくお願いいたします。", "以上、よろしくお願いいたします。"),
        "佐藤花子",
        "経理部長",
        "2026年11月24日(月) 10:00 山田太郎 <taro@example.jp>:",
        "差出人: 山田太郎 <taro@example.jp>\n送信日時: 2026年11月24日 10:00\n宛先: 佐藤花子\n件名: 予算",
        "草案です。出張費をご確認いただけますか？",  # noqa: RUF001
        "iPhoneから送信",
    ),
}

_CONTACT = "+44 20 7946 0958 | www.example.com"


def _reply(code: str, variant: int) -> LabelledEmail:
    """One reply in language `code`; `variant` (0-15) picks the asks, the signature and the quote."""
    language = _LANGUAGES[code]
    asks = [language.asks[variant % 3]] + ([language.asks[(variant + 1) % 3]] if variant % 2 else [])
    if variant % 4 == 0:
        asks.insert(0, language.mixed)
    lines = [language.hello, "", language.context[variant % 2], *asks, ""]
    signoff = language.signoffs[variant % 2]
    signature = variant % 4
    if signature == 0:
        lines += [signoff, language.name]
    elif signature == 1:
        lines += [signoff, language.name, language.title, _CONTACT]
    elif signature == 2:
        lines += [signoff, "--", language.name, language.title]
    else:
        lines += [signoff, language.name, "", language.mobile]
    quote = (variant // 4) % 4
    if quote == 0:
        lines += ["", language.wrote, f"> {language.quoted}"]
    elif quote == 1:
        lines += ["", "________________________________", language.outlook, "", language.quoted]
    elif quote == 2 and code == "en":
        lines += ["", "-----Original Message-----", language.outlook, "", language.quoted]
    elif quote == 2:
        lines += ["", language.outlook, "", language.quoted]
    return LabelledEmail(
        kind="reply",
        language=code,
        sender=f"{language.name} <{language.name.split()[0].lower()}@example.com>",
        subject=f"Re: {language.outlook.splitlines()[-1].split(':', 1)[1].strip()}",
        text="\n".join(lines) + "\n",
        asks=tuple(asks),
    )


# The shapes seen cutting asks in real mail (tests/integrations/test_clean_asks.py has each as a fixture).
_SHAPES: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "Contract",
        "Hi Bob,\nThe contract is attached.\nTake a look and send me your comments by Friday\n"
        "Thanks,\nAlice Moore\nHead of Legal",
        ("Take a look and send me your comments by Friday",),
    ),
    (
        "Q3 close",
        "Hi team,\nQuick update on the Q3 close.\nKhan wants the numbers today\nCan you send yours by 3pm?\n\n"
        "Kind regards,\nMaria Lopez\nFinance | +44 20 7946 0958",
        ("Can you send yours by 3pm?",),
    ),
    (
        "Survey files",
        "Hi,\nThe survey files are on the share:\n/West Delta/Louisiana, Timbalier Bay/2001/seismic\n"
        "/West Delta/Louisiana, Grand Isle/2003/wells\nCould you check whether the Timbalier Bay block is "
        "complete and tell me what is missing?\nThe Grand Isle set went to the partners last week and they "
        "have not complained so far, so I assume it is fine.\n\nOn Mon, Nov 24, 2026 at 10:00 AM Carol Diaz "
        "<carol@example.com> wrote:\n> The files are uploaded.",
        ("Could you check whether the Timbalier Bay block is complete and tell me what is missing?",),
    ),
    (
        "Lease",
        "Hi Carol,\nI reviewed the lease.\nThanks, and please send the signed copy by Monday.\n\nBest,\nDan Okafor",
        ("Thanks, and please send the signed copy by Monday.",),
    ),
    (
        "Budget meeting",
        "Hello,\nBest, I think we should meet Tuesday to go over the budget.\nCan you book a room?\n\nCheers,\nEve Ng",
        ("Best, I think we should meet Tuesday to go over the budget.", "Can you book a room?"),
    ),
    (
        "Spotkanie zarządu",
        "Cześć,\nSpotkanie zarządu:\nData: 1 grudnia, godz. 10:00\nProszę przygotować prezentację na spotkanie.\n"
        "\nPozdrawiam,\nAnna Nowak",
        ("Proszę przygotować prezentację na spotkanie.",),
    ),
    (
        "Client visit",
        "Hi Kim,\nFor tomorrow's visit:\nDo: send the slides to the client before noon.\nDon't: share the price list.\n"
        "\nThanks\nLee Park",
        ("Do: send the slides to the client before noon.", "Don't: share the price list."),
    ),
    (
        "Riunione di progetto",
        "Ciao a tutti,\nRiunione di progetto\nData: 1 dicembre, ore 10\nA: tutto il team\n"
        "Per favore confermate la presenza entro giovedì.\n\nCordiali saluti\nGiulia Rossi",
        ("Per favore confermate la presenza entro giovedì.",),
    ),
    (
        "Offsite",
        "Hi Sam,\nThe offsite is confirmed.\n\nThanks,\nAlice Moore\n\nP.S. Can you bring the projector?",
        ("P.S. Can you bring the projector?",),
    ),
    (
        "Invoice",
        "Hi,\nThanks!\nAlso, could you send the invoice for October?\n\nBest regards,\nAlice Moore\nalice@example.com",
        ("Also, could you send the invoice for October?",),
    ),
    ("Faktura", "Hej,\nKan du skicka fakturan för oktober?\n/Anna", ("Kan du skicka fakturan för oktober?",)),
    (
        "Agenda",
        "Agenda for Monday\n--\nPlease review the attached contract and sign it by Friday.\n"
        "Also book the meeting room for the signing, and tell Legal which day suits us.",
        ("Please review the attached contract and sign it by Friday.", "Also book the meeting room for the signing"),
    ),
]


def _shapes() -> list[LabelledEmail]:
    emails = []
    for subject, text, asks in _SHAPES:
        for quoted in (False, True):
            body = text
            if quoted:
                body += "\n\n-----Original Message-----\nFrom: Chris\nSent: Monday\nTo: you\nSubject: x\n\nSee below."
            emails.append(LabelledEmail("shape", "en", "Chris Young <chris@example.com>", subject, body, asks=asks))
    return emails


_HTML_COLLEAGUES = [
    (
        "Purchase order",
        "Could you approve the purchase order for the new laptops?",
        "We need them before the new hires start on the 1st.",
    ),
    (
        "Slides",
        "Please send me the slides for Thursday's board meeting by tomorrow noon.",
        "The board pack goes out on Wednesday evening.",
    ),
    (
        "Offsite venue",
        "Can you confirm the venue for the offsite by Friday?",
        "The hotel holds the rooms until then.",
    ),
    (
        "Vertrag",
        "Kannst du den Vertrag bis Mittwoch gegenzeichnen?",
        "Die Rechtsabteilung hat keine Einwände mehr.",
    ),
    (
        "Facture",
        "Pouvez-vous valider la facture du fournisseur avant la fin du mois ?",
        "Le montant correspond au devis.",
    ),
]


def _html_colleagues() -> list[LabelledEmail]:
    emails = []
    for n in range(30):
        subject, ask, context = _HTML_COLLEAGUES[n % len(_HTML_COLLEAGUES)]
        quote = (
            '<div style="border-top:1px solid #e1e1e1"><p><b>From:</b> Tom Reed &lt;tom@example.com&gt;<br>'
            "<b>Sent:</b> Monday, November 24, 2026 10:00 AM<br><b>To:</b> Anna Lee<br>"
            f"<b>Subject:</b> {subject}</p></div><p>Old thread text. Could you also check the old figures?</p>"
            if n % 2
            else ""
        )
        html = (
            '<html><body><div style="font-family:Calibri"><p>Hi Tom,</p>'
            f"<p>{context}</p><p>{ask}</p><p>Best regards,<br>Anna Lee<br>Procurement<br>"
            f'<a href="https://example.com">example.com</a> | +1 555 0100 200</p>{quote}</div></body></html>'
        )
        category = "personal" if n % 3 == 0 else "focused" if n % 3 == 1 else "other" if n % 10 == 2 else "updates"
        emails.append(
            LabelledEmail(
                "html", "en", "Anna Lee <anna@example.com>", f"{subject} #{n}", "", html, (ask,), category=category
            )
        )
    return emails


# The reply shapes that used to reach the prompt with their quote, or to lose the reply (tests/fixtures/mail/
# has each, in every language): bottom-posted and interleaved replies, quote headers of another language than
# the text, a "wrote" line without its colon, a dashed header line above its block, and HTML quotes in each
# client's markup. Every quote holds an old ask ("When are you available?"), which is not labelled: it was
# read when that mail arrived.
_OLD_ASK = "When are you available next week? The draft is attached."
_CLEANING_TEXT: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "en",
        "Bottom-posted",
        f"Hi,\n\nOn Mon, Nov 24, 2026 at 10:00 AM Carol Diaz <carol@example.com> wrote:\n> {_OLD_ASK}\n\n"
        "Tuesday works for me.\nCould you send the final draft by Monday?\n\nBest,\nDan",
        ("Could you send the final draft by Monday?",),
    ),
    (
        "de",
        "Unten geantwortet",
        "Hallo,\n\nAm Mo., 24. Nov. 2026 um 10:00 Uhr schrieb Carola Diaz <carola@example.de>:\n"
        "> Wann hast du nächste Woche Zeit?\n\nDienstag passt.\nKannst du mir den Entwurf bis Montag schicken?\n\n"
        "Viele Grüße\nDan",
        ("Kannst du mir den Entwurf bis Montag schicken?",),
    ),
    (
        "fr",
        "Réponses dans le texte",
        "Bonjour Paul,\n\nLe 24/11/2026 à 10:00, Paul Martin a écrit :\n> Quand êtes-vous disponible ?\n\n"
        "Mardi après-midi.\n\n> Qui réserve la salle ?\n\nPouvez-vous la réserver ? Je suis en déplacement.\n\n"
        "Cordialement,\nMarie",
        ("Pouvez-vous la réserver ?",),
    ),
    (
        "en",
        "Polish client",
        "Sounds good.\nCan you send me the final version today?\n\n"
        "W dniu pon., 24.11.2026 o 10:00 Jan Kowalski <jan@example.pl>\nnapisał(a):\n\n"
        f"> {_OLD_ASK}\n> Pozdrawiam\n> Jan",
        ("Can you send me the final version today?",),
    ),
    (
        "en",
        "Dutch client",
        "Sounds good.\nPlease book the room for Tuesday.\n\n"
        f"Op ma 24 nov 2026 om 10:00 schreef Piet Jansen <piet@example.nl>:\n\n> {_OLD_ASK}",
        ("Please book the room for Tuesday.",),
    ),
    (
        "en",
        "No colon",
        "Hi Carol,\n\nYes, Tuesday is fine.\nCan you book the room?\n\n"
        f"On Mon, Nov 24, 2026 at 10:00 AM Carol Diaz <carol@example.com> wrote\n> {_OLD_ASK}",
        ("Can you book the room?",),
    ),
    *[
        (
            "en",
            f"Header {code}",
            f"Sounds good.\nCan you send me the final version today?\n\n{separator}\n{block}\n\n{_OLD_ASK}",
            ("Can you send me the final version today?",),
        )
        for code, separator, block in (
            (
                "de",
                "-----Ursprüngliche Nachricht-----",
                "Von: Paul Becker <paul@example.de>\nGesendet: Montag, 24. November 2026 10:00\nAn: Mary\n"
                "Betreff: Entwurf",
            ),
            (
                "fr",
                "-----Message d'origine-----",
                "De : Paul Martin <paul@example.fr>\nEnvoyé : lundi 24 novembre 2026 10:00\nÀ : Mary\n"
                "Objet : Brouillon",
            ),
            (
                "it",
                "-----Messaggio originale-----",
                "Da: Paolo Bianchi <paolo@example.it>\nInviato: lunedì 24 novembre 2026 10:00\nA: Mary\nOggetto: Bozza",
            ),
            (
                "pt",
                "-----Mensagem original-----",
                "De: Pedro Costa <pedro@example.pt>\nEnviada em: segunda-feira, 24 de novembro de 2026 10:00\n"
                "Para: Mary\nAssunto: Rascunho",
            ),
            (
                "fi",
                "-----Alkuperäinen viesti-----",
                "Lähettäjä: Pekka Virtanen <pekka@example.fi>\nLähetetty: maanantai 24. marraskuuta 2026 10.00\n"
                "Vastaanottaja: Mary\nAihe: Luonnos",
            ),
            (
                "hu",
                "-----Eredeti üzenet-----",
                "Feladó: Nagy Péter <peter@example.hu>\nElküldve: 2026. november 24. 10:00\nCímzett: Mary\n"
                "Tárgy: Vázlat",
            ),
        )
    ],
]
_CLEANING_HTML: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "en",
        "Gmail reply",
        '<div dir="ltr">Hi Carol,<div>Could you send the agenda by Monday?</div></div><br><div class="gmail_quote">'
        '<div dir="ltr" class="gmail_attr">On Mon, Nov 24, 2026 at 10:00 AM Carol Diaz &lt;carol@example.com&gt; '
        f'wrote:<br></div><blockquote class="gmail_quote"><div dir="ltr">{_OLD_ASK}</div></blockquote></div>',
        ("Could you send the agenda by Monday?",),
    ),
    (
        "en",
        "Gmail inline",
        '<div dir="ltr">Answers inline.</div><div class="gmail_quote"><div class="gmail_attr">On Mon, Nov 24, 2026 at '
        f'10:00 AM Carol wrote:</div><blockquote class="gmail_quote">{_OLD_ASK}</blockquote><div>Tuesday.</div>'
        '<blockquote class="gmail_quote">Who books the room?</blockquote><div>Could you book it?</div></div>',
        ("Could you book it?",),
    ),
    (
        "en",
        "Outlook desktop",
        '<div class="WordSection1"><p class="MsoNormal">Hi Tom,</p><p class="MsoNormal">Please approve the purchase '
        'order before Wednesday.</p><div><div style="border:none;border-top:solid #E1E1E1 1.0pt;padding:3.0pt 0cm 0cm '
        '0cm"><p class="MsoNormal"><b>From:</b> Tom Reed &lt;tom@example.com&gt;<br><b>Sent:</b> Monday, November 24, '
        "2026 10:00 AM<br><b>To:</b> Anna Lee<br><b>Subject:</b> Order</p></div></div>"
        f'<p class="MsoNormal">{_OLD_ASK}</p><p class="MsoNormal">Tom</p></div>',
        ("Please approve the purchase order before Wednesday.",),
    ),
    (
        "pt",
        "Outlook na web",
        "<div>Olá Pedro,</div><div>Pode enviar-me o contrato assinado até sexta-feira?</div>"
        '<div id="appendonsend"></div><hr style="display:inline-block;width:98%"><div id="divRplyFwdMsg" dir="ltr">'
        "<b>De:</b> Pedro Costa &lt;pedro@example.pt&gt;<br><b>Enviado:</b> 24 de novembro de 2026 10:00<br>"
        "<b>Para:</b> João Silva<br><b>Assunto:</b> Contrato</div><div>Quando está disponível na próxima semana?</div>",
        ("Pode enviar-me o contrato assinado até sexta-feira?",),
    ),
    (
        "nl",
        "Apple Mail",
        'Hoi Piet,<div>Kun je de agenda voor maandag sturen?</div><div><br><blockquote type="cite"><div>Op 24 nov. '
        "2026 om 10:00 heeft Piet Jansen &lt;piet@example.nl&gt; het volgende geschreven:</div><div>Wanneer ben je "
        "volgende week beschikbaar?</div></blockquote></div>",
        ("Kun je de agenda voor maandag sturen?",),
    ),
    (
        "sv",
        "Thunderbird",
        '<p>Hej Per,</p><div class="moz-cite-prefix">Den 2026-11-24 kl. 10:00, skrev Per Lind:<br></div>'
        '<blockquote type="cite"><p>När har du tid nästa vecka?</p></blockquote><p>Tisdag passar.</p>'
        "<p>Kan du skicka det signerade avtalet före fredag?</p>",
        ("Kan du skicka det signerade avtalet före fredag?",),
    ),
    (
        "es",
        "Yahoo",
        "<div>Hola Ana,</div><div>¿Puedes enviarme el contrato firmado antes del viernes?</div>"
        '<div id="yahoo_quoted_1" class="yahoo_quoted"><div>El lunes, 24 de noviembre de 2026, 10:00:00 CET, Ana Ruiz '
        "escribió:</div><div>¿Cuándo tienes tiempo la semana que viene?</div></div>",
        ("¿Puedes enviarme el contrato firmado antes del viernes?",),
    ),
]


def _cleaning_shapes() -> list[LabelledEmail]:
    sender = "Chris Young <chris@example.com>"
    return [
        *(
            LabelledEmail("shape", code, sender, subject, text, asks=asks)
            for code, subject, text, asks in _CLEANING_TEXT
        ),
        *(LabelledEmail("html", code, sender, subject, "", html, asks) for code, subject, html, asks in _CLEANING_HTML),
    ]


def _newsletters() -> list[LabelledEmail]:
    emails = []
    for n in range(30):
        html = (
            '<html><body><table width="600"><tr><td><a href="https://shop.example.com/?utm=nl">'
            '<img src="https://cdn.example.com/logo.png" alt="Shop"></a></td></tr>'
            f"<tr><td><h1>Winter sale, week {n}: up to 40% off</h1>"
            "<p>Our best sellers are back in stock, with free delivery on orders over 50 EUR.</p>"
            '<p><a href="https://shop.example.com/sale?utm=nl">Shop now</a></p>'
            "<p>New this week: merino jumpers, down jackets, waterproof boots and a range of gloves for "
            "every budget. Members get early access to the spring collection.</p>"
            "<p>You receive this email because you subscribed at shop.example.com. "
            '<a href="https://shop.example.com/unsubscribe">Unsubscribe</a> | '
            '<a href="https://shop.example.com/privacy">Privacy</a></p>'
            "<p>Shop Example GmbH, Hauptstraße 1, 10115 Berlin</p></td></tr></table></body></html>"
        )
        emails.append(
            LabelledEmail(
                "newsletter",
                "en",
                "Shop <news@shop.example.com>",
                f"Winter sale {n}",
                "",
                html,
                bulk=True,
                headers=_MAILCHIMP,
                category="promotions" if n % 3 else "other",  # a third read in Outlook
            )
        )
    return emails


def _notifications() -> list[LabelledEmail]:
    texts = [
        (
            "GitHub <notifications@github.example>",
            "[acme/app] New comment on pull request #{n}",
            "@mary commented on this pull request.\n\nLooks good to me, merging after CI.\n\n—\nReply to this email "
            "directly, view it on GitHub: https://github.example/acme/app/pull/{n}\nYou are receiving this because "
            "you were mentioned.",
        ),
        (
            "Jira <jira@acme.example>",
            "[JIRA] (OPS-{n}) Disk usage above 80% on db-2",
            "Mary Smith changed the status to In Progress.\n\nOPS-{n}: Disk usage above 80% on db-2\n"
            "Priority: Medium\n\nView the issue: https://acme.example/browse/OPS-{n}\n"
            "This message was sent by Atlassian Jira.",
        ),
        (
            "Calendar <calendar@example.com>",
            "Updated invitation: Weekly sync {n}",
            "This event has been changed.\nWeekly sync\nWhen: Tuesday 10:00 - 10:30 (CET)\n"
            "Joining: https://meet.example.com/abc-{n}\nGuests: mary@example.com, john@example.com\n"
            "Invitation from Google Calendar. You are receiving this email because you are an attendee.",
        ),
    ]
    # GitHub and Jira under Gmail's Updates; calendar updates from a colleague's calendar land in Primary with
    # none of the bulk headers, so they are read (Gemini finds no task in them).
    sorting: list[tuple[dict[str, str], str]] = [(_GITHUB, "updates"), (_JIRA, "updates"), ({}, "personal")]
    emails = []
    for n in range(30):
        sender, subject, text = texts[n % len(texts)]
        headers, category = sorting[n % len(texts)]
        emails.append(
            LabelledEmail(
                "notification",
                "en",
                sender,
                subject.format(n=n),
                text.format(n=n),
                bulk=True,
                headers=headers,
                category=category,
            )
        )
    return emails


def _receipts() -> list[LabelledEmail]:
    emails = []
    for n in range(20):
        text = (
            f"Thank you for your order!\n\nOrder #{100_200 + n}\nPlaced on November {1 + n % 28}, 2026\n\n"
            f"1 x USB-C charger ........ 29.00 EUR\n1 x Laptop sleeve ........ {19 + n}.00 EUR\n"
            f"Total: {48 + n}.00 EUR\nPaid with Visa ending in 4242\n\n"
            "Track your parcel: https://shop.example.com/track\nQuestions? Visit our help centre.\n"
            "Shop Example GmbH, Hauptstraße 1, 10115 Berlin"
        )
        # The shop's mailing service adds List-Unsubscribe to every message; Gmail files receipts under Updates,
        # which the bulk rule keeps reading for the bills filed there.
        emails.append(
            LabelledEmail(
                "receipt",
                "en",
                "Shop <orders@shop.example.com>",
                f"Order {n}",
                text,
                bulk=True,
                headers=_MAILING_SERVICE,
                category="updates",
            )
        )
    return emails


def _transactional() -> list[LabelledEmail]:
    """Machine-sent mail that asks something: a bill (its mailing service adds List-Unsubscribe), a form to
    sign (the signing service marks it auto-generated). The bulk rule must read every one."""
    emails = []
    for n in range(8):
        ask = f"Please pay invoice {12_345 + n} of 84.20 EUR by December 5."
        emails.append(
            LabelledEmail(
                "transactional",
                "en",
                "City Power <billing@citypower.example>",
                f"Your invoice {12_345 + n} is ready",
                f"Hello,\n\nyour electricity bill for November is ready.\n{ask}\n"
                "Pay online: https://citypower.example/pay\n\nCity Power Billing\n"
                "You receive this email because you are a City Power customer. Manage email preferences.",
                asks=(ask,),
                headers=_MAILING_SERVICE,
                category="updates" if n % 2 else "focused",
            )
        )
    for n in range(6):
        ask = "Please review and sign the lease agreement by Friday."
        emails.append(
            LabelledEmail(
                "transactional",
                "en",
                "Signing service <dse@sign.example>",
                f"Please sign: Lease agreement {n}",
                f"Dana Estate sent you a document to review and sign.\n\n{ask}\n"
                "Review document: https://sign.example/envelope\n\nDo not share this email.",
                asks=(ask,),
                headers=_AUTOMATIC,
                category="personal" if n % 2 else "updates",
            )
        )
    return emails


def _secrets() -> list[LabelledEmail]:
    emails = []
    for n in range(10):
        code = f"{482_913 + n * 7_717:06d}"
        emails.append(
            LabelledEmail(
                "secret",
                "en",
                "Bank <no-reply@bank.example>",
                "Your verification code",
                f"Your verification code is {code}.\nIt expires in 10 minutes. Never share it with anyone.\n"
                "If you did not ask for it, ignore this email.",
                secrets=(code,),
                bulk=True,
                headers=_AUTOMATIC,
                category="updates",
            )
        )
    for n in range(8):
        password = f"Xk9#mP{n}!qL"
        ask = "Please sign in and change it before Monday."
        emails.append(
            LabelledEmail(
                "secret",
                "en",
                "IT Desk <it@acme.example>",
                "Your new account",
                f"Hi,\n\nYour account for the expense tool is ready.\nUser name: new.hire{n}\n"
                f"Temporary password: {password}\n{ask}\n\nThanks,\nIT Desk",
                asks=(ask,),
                secrets=(password,),
                headers=_AUTOMATIC,  # the ticketing system's
            )
        )
    for n in range(6):
        number = f"411111111111{111 + n:03d}"
        card = " ".join((number + luhn.calc_check_digit(number))[i : i + 4] for i in range(0, 16, 4))
        ask = "Could you book the Berlin flights for the team with the company card?"
        emails.append(
            LabelledEmail(
                "secret",
                "en",
                "Mary Smith <mary@example.com>",
                "Flights",
                f"Hi John,\n\n{ask}\nCard: {card}, expiry 08/28, CVC 7{n}3\n\nThanks,\nMary Smith",
                asks=(ask,),
                secrets=(card, f"CVC 7{n}3"),
            )
        )
    for n in range(6):
        bban = f"37040044053201300{n}"
        account = f"DE{iban.calc_check_digits('DE00' + bban)}{bban}"
        number = " ".join(account[i : i + 4] for i in range(0, len(account), 4))
        ask = "Bitte überweisen Sie den Betrag bis zum 15. Dezember."
        emails.append(
            LabelledEmail(
                "secret",
                "de",
                "Buchhaltung <rechnung@lieferant.example>",
                f"Rechnung 2026-{n}",
                f"Sehr geehrte Damen und Herren,\n\nanbei unsere Rechnung 2026-{n} über 1.200,00 EUR.\n{ask}\n"
                f"IBAN: {number}\nBIC: COBADEFFXXX\n\nMit freundlichen Grüßen\nLieferant GmbH",
                asks=(ask,),
                secrets=(number,),
                headers=_MAILING_SERVICE if n % 2 else _AUTOMATIC,  # their accounting system's
                category="updates" if n % 2 else "personal",
            )
        )
    return [*emails, *_more_secrets()]


def _more_secrets() -> list[LabelledEmail]:
    """Keys, tokens and codes of other shapes and languages, some next to an ask."""
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzdXBwb3J0LTQyIn0.x7Yq2Lr0cT5wWmZpE1kS9dHfVbN3aJ6uQ8gRoI4sMtA"
    return [
        LabelledEmail(
            "secret",
            "en",
            "Ops <ops@acme.example>",
            "Staging keys",
            "Hi John,\n\nCould you rotate the staging keys before the release on Thursday?\n"
            "Current Stripe key: sk_live_51HqLyjWDarjtT1zdp7dcXYZab\nAWS: AKIAIOSFODNN7EXAMPLE\n"
            "api_key=8f14e45fceea167a5a36dedd4bea2543\n\nThanks,\nOps",
            asks=("Could you rotate the staging keys before the release on Thursday?",),
            secrets=("sk_live_51HqLyjWDarjtT1zdp7dcXYZab", "AKIAIOSFODNN7EXAMPLE", "8f14e45fceea167a5a36dedd4bea2543"),
        ),
        LabelledEmail(
            "secret",
            "en",
            "Support <support@vendor.example>",
            "Ticket 4211: API access",
            f"Hello,\n\nplease test the export again with this header:\nAuthorization: Bearer {jwt}\n"
            "Let us know the result.\n\nVendor Support",
            asks=("please test the export again with this header:",),
            secrets=(jwt,),
        ),
        LabelledEmail(
            "secret",
            "en",
            "Dev <dev@acme.example>",
            "CI token",
            "Hi,\nThe CI now uses ghp_1234567890abcdefghijklmnopqrstuvwxyz12 and the Slack hook token "
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKl.\nCan you update the runbook by Friday?\n\nDev",
            asks=("Can you update the runbook by Friday?",),
            secrets=("ghp_1234567890abcdefghijklmnopqrstuvwxyz12", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"),
        ),
        LabelledEmail(
            "secret",
            "de",
            "Bank <noreply@bank.example>",
            "Ihr Bestätigungscode",
            "Ihr Bestätigungscode lautet 736104.\nEr ist 10 Minuten gültig.",
            secrets=("736104",),
            bulk=True,
            headers=_AUTOMATIC,
            category="updates",
        ),
        LabelledEmail(
            "secret",
            "fr",
            "Service informatique <it@societe.example>",
            "Votre compte",
            "Bonjour,\n\nvotre compte est prêt.\nIdentifiant : j.martin\nMot de passe : Hiver2026!x\n"
            "Merci de changer le mot de passe avant lundi.\n\nLe service informatique",
            asks=("Merci de changer le mot de passe avant lundi.",),
            secrets=("Hiver2026!x",),
            headers=_AUTOMATIC,
        ),
        LabelledEmail(
            "secret",
            "en",
            "Security <no-reply@login.example>",
            "482913 is your sign-in code",
            "Use 482913 to sign in. G-551902 is your Google verification code.\nDo not share it.",
            secrets=("482913", "551902"),
            bulk=True,
            headers=_AUTOMATIC,
            category="focused",
        ),
    ]


def labelled_inbox() -> list[LabelledEmail]:
    """The whole inbox, the same on every call."""
    replies = [_reply(code, variant) for code in _LANGUAGES for variant in range(16)]
    return [
        *replies,
        *_shapes(),
        *_cleaning_shapes(),
        *_html_colleagues(),
        *_newsletters(),
        *_notifications(),
        *_receipts(),
        *_transactional(),
        *_secrets(),
    ]
