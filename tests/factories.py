import factory
from django.utils import timezone

from accounts.models import User
from integrations.models import Integration


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
