from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("item", models.TextField()),
                ("quantity", models.IntegerField(default=1)),
                ("status", models.CharField(default="new", max_length=16)),
                ("job_id", models.BigIntegerField()),
            ],
            options={"db_table": "orders"},
        ),
    ]
