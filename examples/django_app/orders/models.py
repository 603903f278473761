from django.db import models


class Order(models.Model):
    id = models.CharField(primary_key=True, max_length=64)
    item = models.TextField()
    quantity = models.IntegerField(default=1)
    status = models.CharField(max_length=16, default="new")
    job_id = models.BigIntegerField()

    class Meta:
        db_table = "orders"  # the worker's handler updates it by name
