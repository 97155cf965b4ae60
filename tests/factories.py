import factory
from django.utils import timezone

from accounts.models import User
from integrations.models import Integration
from tasks.models import Task, TaskEvent
from tasks.services import EmailTaskRow, task_insert_from_emails

PASSWORD = "correct-horse-battery"  # every UserFactory person's


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"person{n}@example.com")
    name = factory.Faker("name")
    email_verified_at = factory.LazyFunction(timezone.now)  # confirmed, unless a test says otherwise
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def _save(obj: User, create: bool, extracted: object, **kwargs: object) -> None:
        if create:
            obj.save()


class IntegrationFactory(factory.django.DjangoModelFactory[Integration]):
    """A connected mailbox without credentials (for tests that never read it)."""

    class Meta:
        model = Integration

    user = factory.SubFactory(UserFactory)
    provider = "gmail"
    account_address = factory.Sequence(lambda n: f"box{n}@example.com")


def email_task_row(
    user: User, integration: Integration, message_id: str, title: str, *, sentence: str = ""
) -> EmailTaskRow:
    """A task the pipeline found in an email of `integration` (for `task_insert_from_emails`)."""
    return EmailTaskRow(
        user_id=user.pk,
        integration_id=integration.pk,
        message_id=message_id,
        email_key=f"<{message_id}@example.com>",
        title=title,
        due_date=None,
        priority="",
        email_link=f"https://mail.google.com/mail/u/0/#all/{message_id}",
        email_sender="Ann <ann@example.com>",
        email_subject=f"About {title}",
        email_received_at=timezone.now(),
        run_id=None,
        sentence=sentence,
    )


def email_task(user: User, integration: Integration, message_id: str, title: str, **fields: object) -> Task:
    """A task the pipeline made from an email of `integration`, then given `fields` (kind, status, ...)."""
    task_insert_from_emails(rows=[email_task_row(user, integration, message_id, title)])
    task = Task.objects.get(user=user, source_id=message_id, title=title)
    if fields:
        Task.objects.filter(pk=task.pk).update(**fields)
        task.refresh_from_db()
    return task


class TaskEventFactory(factory.django.DjangoModelFactory[TaskEvent]):
    """A change an email made to a task (by default: the person's reply in Sent closed it), as the pipeline
    (tasks/conversation.py) records it."""

    class Meta:
        model = TaskEvent

    action = TaskEvent.Action.CLOSED
    by = TaskEvent.By.EMAIL
    at = factory.LazyFunction(timezone.now)
    integration = factory.LazyAttribute(lambda event: event.task.integration)
    message_id = factory.Sequence(lambda n: f"reply{n}")
    web_link = factory.LazyAttribute(lambda event: f"https://mail.google.com/mail/u/0/#all/{event.message_id}")
    email_folder = "sent"
    email_sender = factory.LazyAttribute(lambda event: event.task.user.email)
    email_received_at = factory.LazyFunction(timezone.now)
    sentence = "Here is the deck."
    status_before = Task.Status.OPEN


def email_closes(task: Task, **fields: object) -> TaskEvent:
    """What the pipeline does when an email delivers `task`: the task is done, with its history row."""
    event = TaskEventFactory(task=task, status_before=task.status, **fields)
    Task.objects.filter(pk=task.pk).update(status=Task.Status.DONE, completed_at=event.at, updated_at=event.at)
    task.refresh_from_db()
    return event
