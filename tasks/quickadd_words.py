"""The words that make a phrase a day, in each language quick add reads (tasks/quickadd.py): without one of
them, what dateparser found is not taken ("Read 1984", "Ask May", "bel Jan" stay in the title)."""

from __future__ import annotations

# Today, tomorrow and the weekdays (with their usual short forms), per language.
DAY_WORDS = {
    "en": r"today|tonight|tomorrow|tmrw|(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)[a-z]*",
    "de": r"heute|morgen|übermorgen|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag",
    "fr": r"aujourd'hui|demain|après-demain|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche",
    "es": r"hoy|mañana|pasado mañana|lunes|martes|miércoles|jueves|viernes|sábado|domingo",
    "it": r"oggi|domani|dopodomani|lunedì|martedì|mercoledì|giovedì|venerdì|sabato|domenica",
    "nl": r"vandaag|morgen|overmorgen|maandag|dinsdag|woensdag|donderdag|vrijdag|zaterdag|zondag",
    "pt": r"hoje|amanhã|depois de amanhã|(?:segunda|terça|quarta|quinta|sexta)(?:-feira)?|sábado|domingo",
}
MONTHS = {
    "en": r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?",
    "de": r"januar|jänner|februar|märz|april|mai|juni|juli|august|september|oktober|november|dezember",
    "fr": r"janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre",
    "es": r"enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|diciembre",
    "it": r"gennaio|febbraio|marzo|aprile|maggio|giugno|luglio|agosto|settembre|ottobre|novembre|dicembre",
    "nl": r"januari|februari|maart|april|mei|juni|juli|augustus|september|oktober|november|december",
    "pt": r"janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro",
}
# "next week" and "in 3 days".
RELATIVE = {
    "en": r"next\s+(?:week|month)|in\s+\d+\s+(?:days?|weeks?|months?)",
    "de": r"nächste\s+woche|nächsten\s+monat|in\s+\d+\s+(?:tagen?|wochen?|monaten?)",
    "fr": r"(?:la\s+)?semaine\s+prochaine|(?:le\s+)?mois\s+prochain|dans\s+\d+\s+(?:jours?|semaines?|mois)",
    "es": r"(?:la\s+)?próxima\s+semana|(?:la\s+)?semana\s+que\s+viene|en\s+\d+\s+(?:días?|semanas?|meses?)",
    "it": r"(?:la\s+)?prossima\s+settimana|(?:la\s+)?settimana\s+prossima"
    r"|(?:tra|fra)\s+\d+\s+(?:giorni|settimane|mesi)",
    "nl": r"volgende\s+week|over\s+\d+\s+(?:dagen|weken|maanden)",
    "pt": r"(?:na\s+)?próxima\s+semana|(?:na\s+)?semana\s+que\s+vem|(?:em|daqui\s+a)\s+\d+\s+(?:dias?|semanas?|meses?)",
}
# A time of day: "3pm", "at 3:45pm", "15:30", "um 14:30 Uhr", "10h", "alle 15", "om 10 uur", "às 10h", "noon"; with
# the little word before it, so that the whole is taken out of the title.
_BEFORE_TIME = r"at|um|om|à|às|alle|a\s+las|a\s+la"
_CLOCK = r"\d{1,2}(?::\d{2}|h\d{2})?"
TIME = (
    rf"\b(?:(?:{_BEFORE_TIME})\s+)?(?:{_CLOCK}\s*(?:am|pm|uhr|uur)\b|\d{{1,2}}:\d{{2}}\b|\d{{1,2}}h(?:\d{{2}})?\b)"
    rf"|\b(?:{_BEFORE_TIME})\s+\d{{1,2}}\b|\b(?:at\s+)?noon\b"
)
# The day after tomorrow, which dateparser reads as tomorrow ("pasado mañana") or not at all.
AFTER_TOMORROW = {
    "en": r"(?:the\s+)?day\s+after\s+tomorrow",
    "de": r"übermorgen",
    "fr": r"après-demain",
    "es": r"pasado\s+mañana",
    "it": r"dopodomani",
    "nl": r"overmorgen",
    "pt": r"depois\s+de\s+amanhã",
}
# Words left at the end of the title once the date is taken out ("Rechnung bezahlen bis" Freitag), per language:
# only the person's own are taken off ("Vote no tomorrow" keeps its English "no"; in Portuguese it is "in the").
DANGLING = {
    "en": r"by|on|due|before|until|at|for",
    "de": r"bis|am|an|vor|zum|für|um",
    "fr": r"pour|avant|d'ici|le|la|à",
    "es": r"para|antes(?:\s+del?)?|el|a",
    "it": r"entro|per|prima\s+di|il|alle",
    "nl": r"voor|op|uiterlijk|om",
    "pt": r"até|em|no|na|para|às",
}
# Before a weekday, a word that makes it part of a name ("ring the Monday club", "le club du lundi", "el club de
# los lunes"): the weekday is then a date only if nothing but a time or the end of the text follows it.
NAMING = r"the|a|du|des|los|del|dei|das|dos|van"
