import json

from django.db import IntegrityError, connection, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from . import jobs
from .models import Order


@csrf_exempt
@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body)
    try:
        with transaction.atomic():
            # The job rides in Django's own transaction: it commits with the
            # order or not at all, so no on_commit hook is needed.
            with jobs.store().join(connection.connection) as tx:
                job_id = tx.enqueue("orders", {"order_id": data["id"]})
            Order.objects.create(
                id=data["id"], item=data["item"], quantity=data.get("quantity", 1), job_id=job_id
            )
    except IntegrityError:  # a duplicate id: the rollback took the job with it
        return JsonResponse({"error": f"order {data['id']} already exists"}, status=409)
    return JsonResponse({"id": data["id"], "job_id": job_id}, status=201)


@require_GET
def read_order(request: HttpRequest, order_id: str) -> JsonResponse:
    order = Order.objects.filter(id=order_id).values().first()
    if order is None:
        return JsonResponse({"error": f"no order {order_id}"}, status=404)
    return JsonResponse(order)


@require_GET
def queue_stats(request: HttpRequest) -> JsonResponse:
    stats = jobs.store().queue("orders").stats()
    return JsonResponse(
        {"ready": stats.ready, "scheduled": stats.scheduled,
         "processing": stats.processing, "dead": stats.dead, "paused": stats.paused}
    )  # fmt: skip
