# A person could mute their own address ("Never make tasks from this sender" on a waiting or promised item of
# their Sent mail), and every later promise and waiting item in their Sent mail was then skipped before Gemini
# (issue 31). Tasklift now refuses it; the mutes made before are lifted here, and their number said.

from django.db import migrations


def lift_own_address_mutes(apps, schema_editor):
    MutedSender = apps.get_model("extraction", "MutedSender")
    Integration = apps.get_model("integrations", "Integration")
    User = apps.get_model("accounts", "User")
    own = {}
    for user_id, email in User.objects.filter(muted_senders__isnull=False).values_list("id", "email").distinct():
        own.setdefault(user_id, set()).add(email.lower())
    for user_id, address in Integration.objects.filter(user_id__in=list(own)).values_list("user_id", "account_address"):
        own[user_id].add(address.lower())
    lifted = [
        pk
        for pk, user_id, address in MutedSender.objects.values_list("pk", "user_id", "address")
        if address.lower() in own.get(user_id, ())
    ]
    MutedSender.objects.filter(pk__in=lifted).delete()
    print(f"  Lifted {len(lifted)} mutes of people's own addresses (their Sent mail is read again).")


class Migration(migrations.Migration):
    dependencies = [
        ("extraction", "0017_ledger_purpose"),
        ("integrations", "0009_polling_by_need"),
        ("accounts", "0007_runs_seen_at"),
    ]

    operations = [migrations.RunPython(lift_own_address_mutes, migrations.RunPython.noop)]
