"""What every request family of Admin builds on: the ClientInstance it owns or shares,
one request with the answers it accepts (AdminError otherwise), and where to send it
(the name server's cluster info and topic routes, the brokers looked up in them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AsyncExitStack

from ...errors import RemotingError, ResponseError
from ...protocol.bodies import ClusterInfo, TopicRouteData
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.headers import GetRouteInfoRequestHeader
from ...protocol.heartbeat import MessageQueue
from ..admin_types import AdminError, BrokerInfo, ClusterSummary
from ..config import ClientConfig
from ..instance import ClientInstance, Header
from ..lifetime import PartsLifetime

SUCCESS = (ResponseCode.SUCCESS,)


class AdminBase(PartsLifetime):
    """An async context manager owning (or sharing) one ClientInstance; the families of
    requests (topics.py, groups.py, ...) are mixins over it."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] = "",
        *,
        config: ClientConfig | None = None,
        instance: ClientInstance | None = None,
        route_timeout: float = 10.0,
    ) -> None:
        self.config = config or (instance.config if instance else ClientConfig(namesrv_addr))
        self.instance = instance or ClientInstance(self.config)
        self.route_timeout = route_timeout  # how long create_topic waits to be routed

    async def _start(self, lifetime: AsyncExitStack) -> None:
        await lifetime.enter_async_context(self.instance)

    # --- requests ------------------------------------------------------------------------

    async def _broker(
        self,
        address: str,
        code: int,
        header: Header = None,
        body: bytes = b"",
        *,
        what: str,
        accept: Iterable[int] = SUCCESS,
        timeout: float | None = None,
    ) -> RemotingCommand:
        """One request to a broker; AdminError says what failed there and why."""
        try:
            return await self.instance.invoke(
                address, code, header, body, accept=accept, timeout=timeout
            )
        except ResponseError as exc:
            raise AdminError(
                f"{what} failed on broker {address}: {exc}", address=address, code=exc.code
            ) from exc
        except (RemotingError, OSError) as exc:
            raise AdminError(
                f"{what} failed: broker {address} did not answer ({exc})", address=address
            ) from exc

    async def _namesrv(
        self,
        code: int,
        header: Header = None,
        body: bytes = b"",
        *,
        what: str,
        accept: Iterable[int] = SUCCESS,
    ) -> RemotingCommand:
        """One request to the first name server that answers."""
        try:
            return await self.instance.invoke_namesrv(code, header, body, accept=accept)
        except ResponseError as exc:
            raise AdminError(f"{what} failed on the name server: {exc}", code=exc.code) from exc
        except RemotingError as exc:
            raise AdminError(f"{what} failed: {exc} (is a name server running there?)") from exc

    async def _every_namesrv(self, code: int, header: Header, *, what: str) -> None:
        """The same request to every name server (they share nothing); all must succeed."""
        failures: list[str] = []
        for address in self.instance.namesrv_addresses:
            try:
                await self.instance.invoke(address, code, header)
            except (ResponseError, RemotingError, OSError) as exc:
                failures.append(f"{address}: {exc}")
        if failures:
            raise AdminError(f"{what} failed on name server " + "; ".join(failures))

    # --- where to send: the name server's view ------------------------------------------

    async def cluster_info(self) -> ClusterSummary:
        response = await self._namesrv(
            RequestCode.GET_BROKER_CLUSTER_INFO, what="reading the cluster info"
        )
        info = ClusterInfo.decode(response.body)
        self.instance.learn_endpoints(info.broker_addr_table.values())
        return ClusterSummary(
            {cluster: sorted(names) for cluster, names in sorted(info.cluster_addr_table.items())},
            {
                name: BrokerInfo(data.cluster, name, dict(sorted(data.broker_addrs.items())))
                for name, data in sorted(info.broker_addr_table.items())
            },
        )

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The name server's route of ``topic``, fresh; AdminError TOPIC_NOT_EXIST if none."""
        try:
            response = await self.instance.invoke_namesrv(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic)
            )
        except ResponseError as exc:
            raise AdminError(
                f"topic {topic!r} has no route: {(exc.remark or str(exc)).splitlines()[0]}"
                if exc.code == ResponseCode.TOPIC_NOT_EXIST
                else f"reading the route of {topic!r} failed on the name server: {exc}",
                code=exc.code,
            ) from exc
        except RemotingError as exc:
            raise AdminError(f"reading the route of {topic!r} failed: {exc}") from exc
        return TopicRouteData.decode(response.body)

    async def _targets(
        self, cluster: str | None, broker_addr: str | None, *, what: str
    ) -> list[tuple[str, str]]:
        """(broker name, master address) to write ``what`` to: one broker, or every master
        of a cluster (the only cluster when none is named)."""
        if cluster is not None and broker_addr is not None:
            raise ValueError("name a cluster or a broker address, not both")
        summary = await self.cluster_info()
        if broker_addr is not None:
            broker = summary.broker_at(broker_addr)
            return [(broker.broker_name if broker else broker_addr, broker_addr)]
        if cluster is None:
            if len(summary.clusters) != 1:
                known = ", ".join(summary.clusters) or "none registered"
                raise AdminError(f"{what}: name a cluster or a broker address (clusters: {known})")
            cluster = next(iter(summary.clusters))
        masters = summary.masters(cluster)
        if not masters:
            raise AdminError(f"{what}: cluster {cluster!r} has no broker master")
        return [(broker.broker_name, broker.master_address or "") for broker in masters]

    async def _masters(self) -> list[tuple[str, str]]:
        """(broker name, address) of every master the name server knows."""
        summary = await self.cluster_info()
        return [(broker.broker_name, broker.master_address or "") for broker in summary.masters()]

    async def _route_brokers(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, address to read from) of each broker serving ``topic``."""
        route = await self.topic_route(topic)
        brokers = []
        for data in sorted(route.broker_datas, key=lambda b: b.broker_name):
            address = BrokerInfo(data.cluster, data.broker_name, data.broker_addrs).any_address
            if address:
                brokers.append((data.broker_name, address))
        return brokers

    async def _queue_address(self, queue: MessageQueue) -> str:
        for name, address in await self._route_brokers(queue.topic):
            if name == queue.broker_name:
                return address
        raise AdminError(f"broker {queue.broker_name!r} does not serve topic {queue.topic!r}")


def queue_name(queue: MessageQueue) -> str:
    return f"{queue.topic}@{queue.broker_name}#{queue.queue_id}"
