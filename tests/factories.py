import factory
from django.utils import timezone

from accounts.models import User
from integrations.models import Integration
from tasks.services import EmailTaskRow


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"person{n}@example.com")
    name = factory.Faker("name")
    email_verified_at = factory.LazyFunction(timezone.now)  # confirmed, unless a test says otherwise
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery")

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
