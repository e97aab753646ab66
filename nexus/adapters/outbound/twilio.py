"""Twilio Messages (SMS, MMS and WhatsApp via Twilio), with a status callback so Twilio
reports delivered / failed back to /v1/inbound/twilio."""

from __future__ import annotations

import httpx

from nexus.adapters.outbound.http import classify, id_at, new_client, transport_failure
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, SendResult


class TwilioSender:
    name = "twilio"

    def __init__(
        self,
        account_sid: str | None,
        auth_token: str | None,
        api_base: str,
        public_url: str | None = None,
        client: httpx.Client | None = None,
    ):
        self._sid = account_sid
        self._token = auth_token
        self._base = api_base.rstrip("/")
        self._callback = f"{public_url.rstrip('/')}/v1/inbound/twilio" if public_url else None
        self._client = client or new_client()

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        return False  # creating a Message twice sends it twice

    def send(self, delivery: DeliveryRecord) -> SendResult:
        if not self._sid or not self._token:
            return Refused("NEXUS_TWILIO_ACCOUNT_SID and NEXUS_TWILIO_AUTH_TOKEN must be set")
        form = {"To": delivery.target["to"], "From": delivery.target["from"], "Body": delivery.text}
        if self._callback:
            form["StatusCallback"] = self._callback
        try:
            response = self._client.post(
                f"{self._base}/2010-04-01/Accounts/{self._sid}/Messages.json",
                data=form,
                auth=(self._sid, self._token),
            )
        except httpx.HTTPError as error:
            return transport_failure(error)
        return classify(response, message_id=id_at("sid"))
