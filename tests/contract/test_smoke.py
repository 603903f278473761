import pytest

from alkstore import Store


@pytest.mark.producer
async def test_enqueue_claim_ack_roundtrip(store: Store) -> None:
    q = store.queue("smoke")
    job_id = await q.enqueue({"n": 1})
    job = await q.claim_one("w")
    assert job is not None and job.id == job_id and job.payload == {"n": 1}
    assert await job.ack() is True
    assert await q.get_job(job_id) is None
