from django import forms

from tasks.models import Task


class TaskForm(forms.Form):
    title = forms.CharField(max_length=300, label="New task")
    due_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="Due")
    priority = forms.ChoiceField(choices=[("", "No priority"), *Task.Priority.choices], required=False)
