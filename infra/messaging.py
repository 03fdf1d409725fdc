"""SQS work queues and their dead-letter queues, exactly as batchroute.resources declares them."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from batchroute import resources
from infra.naming import construct_id


class Messaging(Construct):
    def __init__(self, scope: Construct, construct_id_: str, *, prefix: str, key: kms.IKey) -> None:
        super().__init__(scope, construct_id_)
        self.queues: dict[str, sqs.Queue] = {}
        self.dead_letter_queues: dict[str, sqs.Queue] = {}
        for spec in resources.QUEUES:
            dlq = sqs.Queue(
                self,
                construct_id(spec.key, "DeadLetterQueue"),
                queue_name=spec.dlq_physical_name(prefix),
                retention_period=Duration.seconds(spec.dlq_retention_seconds),
                encryption=sqs.QueueEncryption.KMS,
                encryption_master_key=key,
                enforce_ssl=True,
            )
            self.dead_letter_queues[spec.key] = dlq
            self.queues[spec.key] = sqs.Queue(
                self,
                construct_id(spec.key, "Queue"),
                queue_name=spec.physical_name(prefix),
                visibility_timeout=Duration.seconds(spec.visibility_timeout_seconds),
                retention_period=Duration.seconds(spec.retention_seconds),
                dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=spec.max_receive_count, queue=dlq),
                encryption=sqs.QueueEncryption.KMS,
                encryption_master_key=key,
                enforce_ssl=True,
            )

    def urls(self) -> dict[str, str]:
        return {key: queue.queue_url for key, queue in self.queues.items()}
