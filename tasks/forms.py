from django import forms
from django.urls import reverse_lazy

from tasks.models import Task
from tasks.repeat import WORKDAYS, repeat_words

PRIORITY_CHOICES = [("", "No priority"), *Task.Priority.choices]
# The repeats offered in the edit form (quick add and the API take any rule tasks/repeat.py keeps).
REPEAT_CHOICES = [
    ("", "Does not repeat"),
    ("FREQ=DAILY", "Every day"),
    (f"FREQ=WEEKLY;BYDAY={WORKDAYS}", "Every weekday"),
    ("FREQ=WEEKLY", "Every week"),
    ("FREQ=WEEKLY;INTERVAL=2", "Every 2 weeks"),
    ("FREQ=MONTHLY", "Every month"),
    ("FREQ=YEARLY", "Every year"),
]


class TaskForm(forms.Form):
    # Typing shows what quick add understands (tasks/quickadd.py) in #quick-add-preview, before saving.
    title = forms.CharField(
        max_length=300,
        label="New task",
        widget=forms.TextInput(
            attrs={
                "hx-get": reverse_lazy("quick_add_preview"),
                "hx-trigger": "input changed delay:300ms, change from:#id_due_date, change from:#id_keep_as_typed",
                "hx-include": "#add-task",
                "hx-target": "#quick-add-preview",
                "hx-swap": "outerHTML",
                "aria-describedby": "quick-add-preview",
                "autocomplete": "off",
                "placeholder": "Add a task: “Call Sam tomorrow 3pm”",
            }
        ),
    )
    due_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="Due")
    priority = forms.ChoiceField(choices=PRIORITY_CHOICES, required=False)
    keep_as_typed = forms.BooleanField(required=False, label="Keep the text as typed (no date from it)")


# The reminders offered (minutes before the task's time; the API takes any up to a week).
REMINDER_CHOICES = [
    ("", "No reminder"),
    ("0", "At the time"),
    ("10", "10 minutes before"),
    ("30", "30 minutes before"),
    ("60", "1 hour before"),
    ("1440", "1 day before"),
]


def _reminder_of(task: Task) -> str:
    from reminders.models import Reminder

    minutes = Reminder.objects.filter(task=task).values_list("minutes_before", flat=True).first()
    return "" if minutes is None else str(minutes)


class TaskEditForm(forms.Form):
    """The fields a person edits in place on a task. The service checks them again (range of due dates)."""

    title = forms.CharField(max_length=300)
    notes = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3}))
    due_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="Due")
    due_time = forms.TimeField(required=False, widget=forms.TimeInput(attrs={"type": "time"}), label="At")
    priority = forms.ChoiceField(choices=PRIORITY_CHOICES, required=False)
    repeat = forms.ChoiceField(choices=REPEAT_CHOICES, required=False, label="Repeats")
    reminder = forms.TypedChoiceField(
        choices=REMINDER_CHOICES, required=False, coerce=int, empty_value=None, label="Remind me"
    )

    def __init__(self, *args: object, task: Task, **kwargs: object) -> None:
        kwargs.setdefault("auto_id", f"task-{task.pk}-%s")
        kwargs.setdefault(
            "initial",
            {
                "title": task.title,
                "notes": task.notes,
                "due_date": task.due_date,
                "due_time": task.due_time,
                "priority": task.priority,
                "repeat": task.repeat_rule,
                "reminder": _reminder_of(task),
            },
        )
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        repeat = self.fields["repeat"]
        assert isinstance(repeat, forms.ChoiceField)
        if task.repeat_rule and task.repeat_rule not in dict(REPEAT_CHOICES):  # a rule typed or set by the API
            words = repeat_words(task.repeat_rule)
            repeat.choices = [*REPEAT_CHOICES, (task.repeat_rule, words[:1].upper() + words[1:])]
