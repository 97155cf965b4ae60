from django.db import migrations, models
from django.db.models.functions import Now


def grandfather_existing_accounts(apps, schema_editor):
    """Accounts made before confirmation existed keep working: they are marked confirmed as of this
    migration (not as of their sign-up, which would claim a check that never happened)."""
    User = apps.get_model("accounts", "User")
    User.objects.filter(email_verified_at__isnull=True).update(email_verified_at=Now())


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_readable_names'),
    ]

    operations = [
        migrations.AddField(
            model_name='user',
            name='email_verified_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='email address confirmed at'),
        ),
        migrations.RunPython(grandfather_existing_accounts, migrations.RunPython.noop),
    ]
