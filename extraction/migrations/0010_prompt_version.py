# The prompt version of each run. Main holds 0008_llm_retry_after by the time this is merged: the dependency
# below is then changed to it (this branch was cut before it existed).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('extraction', '0009_continued'),
    ]

    operations = [
        migrations.AddField(
            model_name='extractionrun',
            name='prompt_version',
            field=models.CharField(blank=True, max_length=16),
        ),
    ]
