from django.urls import path

from orders import views

urlpatterns = [
    path("orders", views.create_order),
    path("orders/<str:order_id>", views.read_order),
    path("queue", views.queue_stats),
]
