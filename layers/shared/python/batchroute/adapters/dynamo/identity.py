"""The identity table: orgs, users, email claims, API keys, sessions and single-use tokens.

Keys and session tokens are found by their keyed hash in one GetItem. An email is claimed
by a conditional put inside the same transaction that creates the account, so concurrent
registrations of one address create exactly one account.

An API key is written twice in one transaction: at `KEY#<hash>` (what a request's key is
checked against) and as its org's copy, `ORG#<org>` / `APIKEY#<key id>`, which listing and
revoking read consistently, so a key revoked or listed a moment after its creation is found
(gsi1, which also lists it, is eventually consistent). A revoke writes both. Keys created
before the copies existed are still found through gsi1, which has long caught up with them;
revoking one writes its copy.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from batchroute.adapters.dynamo.codec import (
    EXISTS,
    NEW,
    condition_check,
    from_item,
    org_item,
    org_key,
    org_pk,
    put_request,
    to_item,
    update_request,
)
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import transact_unless_refused, written
from batchroute.clock import epoch_seconds
from batchroute.domain.accounts.accounts import ApiKey, Org, Session, SpentToken, User
from batchroute.domain.stored import from_stored
from batchroute.errors import Conflict
from batchroute.transactions import TransactItem

# The sort key prefix of an org's copy of each of its API keys (module doc).
_KEY_COPY = "APIKEY#"


class EmailTaken(Conflict):
    default_code = "email_taken"


def _version(item: dict[str, Any]) -> int:
    """An item's credentials_version (a user's or a session's; 0 on items stored before it)."""
    return int(item.get("credentials_version", 0))


def _meta_key(pk: str, sk: str = "META") -> dict[str, Any]:
    """The key of an identity item: an org, user, key, session or token is its partition's
    `META` item (an email's claim, `CLAIM`)."""
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def key_unrevoked_check(table_name: str, key_hash: str) -> dict[str, Any]:
    """A TransactWriteItems ConditionCheck: the API key behind `key_hash` still exists and is
    not revoked (a direct chat hold confirms a key read from the process's copy with it)."""
    return condition_check(
        table_name, _meta_key(f"KEY#{key_hash}"), "attribute_exists(pk) AND attribute_not_exists(revoked_at)"
    )


class IdentityStore(DynamoStore):
    # -- items ---------------------------------------------------------------------------
    def _put(self, values: dict[str, Any], *, condition: str | None = None) -> TransactItem:
        return {"Put": put_request(self.table_name, to_item(values), condition=condition)}

    def _get(self, pk: str, sk: str = "META") -> dict[str, Any] | None:
        return self.item_at(_meta_key(pk, sk))

    def org_item(self, org: Org) -> TransactItem:
        return self._put({"pk": f"ORG#{org.org_id}", "sk": "META", "kind": "org", **asdict(org)})

    def user_item(self, user: User) -> TransactItem:
        return self._org_listed(f"USER#{user.user_id}", "user", user, listed_as=f"USER#{user.user_id}")

    def email_claim_item(self, user: User) -> TransactItem:
        return self._put(
            {"pk": f"EMAIL#{user.email}", "sk": "CLAIM", "kind": "email_claim", "user_id": user.user_id},
            condition=NEW,
        )

    def key_items(self, key: ApiKey) -> list[TransactItem]:
        """The key where requests find it by hash, and its org's copy (module doc)."""
        return [
            self._org_listed(
                f"KEY#{key.key_hash}", "api_key", key, listed_as=f"KEY#{key.key_id}", condition=NEW
            ),
            self._key_copy(key, condition=NEW),
        ]

    def _key_copy(self, key: ApiKey, *, condition: str | None = None) -> TransactItem:
        copy = org_item(key.org_id, f"{_KEY_COPY}{key.key_id}", "api_key_copy")
        return self._put({**copy, **asdict(key)}, condition=condition)

    def _org_listed(
        self, pk: str, kind: str, record: User | ApiKey, *, listed_as: str, condition: str | None = None
    ) -> TransactItem:
        """A record's META item at `pk`, listed among its org's (gsi1: `ORG#<org>`, `listed_as`)."""
        values = {"pk": pk, "sk": "META", "kind": kind, "gsi1pk": f"ORG#{record.org_id}", "gsi1sk": listed_as}
        return self._put({**values, **asdict(record)}, condition=condition)

    # -- accounts ------------------------------------------------------------------------
    def create_account(
        self, *, org: Org, user: User, api_key: ApiKey | None = None, extra: list[TransactItem] | None = None
    ) -> None:
        """Org, owner user, email claim, optional first key and any extra items (the wallet), at once."""
        items = [self.email_claim_item(user), self.user_item(user), self.org_item(org)]
        if api_key is not None:
            items.extend(self.key_items(api_key))
        items.extend(extra or [])
        if not transact_unless_refused(self.dynamodb, items, 0, or_unnamed=True):
            raise EmailTaken("An account with this email already exists.")

    def user_by_email(self, email: str) -> User | None:
        claim = self._get(f"EMAIL#{email}", "CLAIM")
        return self.get_user(claim["user_id"]) if claim else None

    def get_user(self, user_id: str) -> User | None:
        item = self._get(f"USER#{user_id}")
        return from_stored(User, item, credentials_version=_version(item)) if item else None

    def get_org(self, org_id: str) -> Org | None:
        item = self._get(f"ORG#{org_id}")
        return from_stored(Org, item) if item else None

    def members(self, org_id: str) -> list[User]:
        items = self._query_gsi1(f"ORG#{org_id}", "USER#")
        return [u for u in (self.get_user(i["user_id"]) for i in items) if u is not None]

    def update_user(self, user_id: str, **changes: Any) -> None:
        self._update(f"USER#{user_id}", changes)

    def set_password(self, user_id: str, password_hash: str, *, verified_at: str) -> None:
        """A new password: its hash, the address verified (when it was not yet) and one more
        credentials_version, in one write (concurrent resets each count)."""
        self.dynamodb.update_item(
            **update_request(
                self.table_name,
                _meta_key(f"USER#{user_id}"),
                "SET password_hash = :hash, email_verified_at = if_not_exists(email_verified_at, :at) "
                "ADD credentials_version :one",
                condition=EXISTS,
                values={":hash": password_hash, ":at": verified_at, ":one": 1},
            )
        )

    def rehash_password(self, user_id: str, *, old_hash: str, new_hash: str) -> bool:
        """The same password under new hashing parameters, only while `old_hash` is still the
        user's; False when the password changed meanwhile (it stays)."""
        return self.update_where(
            _meta_key(f"USER#{user_id}"),
            "SET password_hash = :new",
            condition="password_hash = :old",
            values={":new": new_hash, ":old": old_hash},
        )

    def update_org(self, org_id: str, **changes: Any) -> None:
        self._update(f"ORG#{org_id}", changes)

    def _update(self, pk: str, changes: dict[str, Any]) -> None:
        """SET the fields given a value and REMOVE those given None, on an existing item (else
        raises)."""
        kept = [name for name, value in changes.items() if value is not None]
        cleared = [name for name, value in changes.items() if value is None]
        names = {f"#f{i}": name for i, name in enumerate([*kept, *cleared])}
        clauses = []
        if kept:
            clauses.append("SET " + ", ".join(f"#f{i} = :f{i}" for i in range(len(kept))))
        if cleared:
            clauses.append("REMOVE " + ", ".join(f"#f{i}" for i in range(len(kept), len(names))))
        self.dynamodb.update_item(
            **update_request(
                self.table_name,
                _meta_key(pk),
                " ".join(clauses),
                condition=EXISTS,
                names=names,
                values={f":f{i}": changes[name] for i, name in enumerate(kept)},
            )
        )

    # -- API keys ------------------------------------------------------------------------
    def put_key(self, key: ApiKey) -> None:
        self.dynamodb.transact_write_items(TransactItems=self.key_items(key))

    def key_by_hash(self, key_hash: str) -> ApiKey | None:
        item = self._get(f"KEY#{key_hash}")
        return from_stored(ApiKey, item) if item else None

    def keys_of(self, org_id: str) -> list[ApiKey]:
        """The org's keys: their copies, read consistently, and any key from before the copies."""
        copies = self.query_all(prefix_query(self.table_name, org_pk(org_id), _KEY_COPY, ConsistentRead=True))
        keys = {str(i["key_id"]): from_stored(ApiKey, i) for i in copies}
        for item in self._query_gsi1(org_pk(org_id), "KEY#"):
            keys.setdefault(str(item["key_id"]), from_stored(ApiKey, item))
        return list(keys.values())

    def key_of(self, org_id: str, key_id: str) -> ApiKey | None:
        """The org's key `key_id` as it stands (its copy, or a key from before the copies)."""
        copy = self.item_at(org_key(org_id, f"{_KEY_COPY}{key_id}"))
        if copy is not None:
            return from_stored(ApiKey, copy)
        return next((k for k in self.keys_of(org_id) if k.key_id == key_id), None)

    def revoke_key(self, key: ApiKey, at: str) -> bool:
        """Revoke the key and its copy at once; False when it was already revoked."""
        revoke = self._stamp_once(f"KEY#{key.key_hash}", "revoked_at", at)
        return self.transact([{"Update": revoke}, self._key_copy(replace(key, revoked_at=at))])

    def _stamp_once(self, pk: str, field: str, at: str, *, also: str | None = None) -> dict[str, Any]:
        """The update that sets `field` to `at` on the item at `pk` once: refused when the
        item is gone or `field` is set already (or `also`, a further condition on `:at`, fails)."""
        unset = f"attribute_exists(pk) AND attribute_not_exists({field})"
        condition = f"{unset} AND {also}" if also else unset
        return update_request(
            self.table_name, _meta_key(pk), f"SET {field} = :at", condition=condition, values={":at": at}
        )

    # -- sessions ------------------------------------------------------------------------
    def put_session(self, session: Session) -> None:
        values = {
            "pk": f"SESSION#{session.token_hash}",
            "sk": "META",
            "kind": "session",
            "gsi1pk": f"USER#{session.user_id}",
            "gsi1sk": f"SESSION#{session.created_at}#{session.session_id}",
            "ttl": epoch_seconds(session.expires_at),
            **asdict(session),
        }
        self.overwrite(values)

    def session_by_hash(self, token_hash: str) -> Session | None:
        item = self._get(f"SESSION#{token_hash}")
        return from_stored(Session, item, credentials_version=_version(item)) if item else None

    def revoke_session(self, token_hash: str, at: str) -> None:
        self.dynamodb.update_item(
            **update_request(
                self.table_name,
                _meta_key(f"SESSION#{token_hash}"),
                "SET revoked_at = if_not_exists(revoked_at, :at)",
                condition=EXISTS,
                values={":at": at},
            )
        )

    def revoke_user_sessions(self, user_id: str, at: str, *, keep_token_hash: str | None = None) -> int:
        revoked = 0
        for item in self._query_gsi1(f"USER#{user_id}", "SESSION#"):
            if item["token_hash"] != keep_token_hash and not item.get("revoked_at"):
                self.revoke_session(item["token_hash"], at)
                revoked += 1
        return revoked

    # -- single-use tokens (email verification, password reset) --------------------------
    def put_token(
        self, *, purpose: str, token_hash: str, user_id: str, expires_at: str, credentials_version: int = 0
    ) -> None:
        values = {
            "pk": f"TOKEN#{purpose}#{token_hash}",
            "sk": "META",
            "kind": "token",
            "purpose": purpose,
            "user_id": user_id,
            "expires_at": expires_at,
            "credentials_version": credentials_version,
            "ttl": epoch_seconds(expires_at),
        }
        self.overwrite(values)

    def consume_token(self, *, purpose: str, token_hash: str, now: str) -> SpentToken | None:
        """The token, once: a used, expired or unknown token gives None."""
        request = self._stamp_once(f"TOKEN#{purpose}#{token_hash}", "used_at", now, also="expires_at > :at")
        response = written(self.dynamodb.update_item, **request, ReturnValues="ALL_NEW")
        if response is None:
            return None
        item = from_item(response["Attributes"])
        return SpentToken(str(item["user_id"]), _version(item))

    # -- helpers -------------------------------------------------------------------------
    def _query_gsi1(self, partition: str, sort_prefix: str) -> list[dict[str, Any]]:
        return self.query_all(prefix_query(self.table_name, partition, sort_prefix, index="gsi1"))
