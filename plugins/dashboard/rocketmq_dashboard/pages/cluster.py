"""The cluster page: every broker of every cluster with its role, version, In/Out TPS
(GET_BROKER_RUNTIME_INFO putTps and getTransferedTps) and CommitLog disk use."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rocketmq_core.cli.cluster import first_tps
from rocketmq_core.client.admin import Admin
from rocketmq_core.errors import RocketMQError

from ..web import admin_of, render


@dataclass
class BrokerRow:
    cluster: str
    name: str
    broker_id: int
    address: str
    runtime: dict[str, str]
    error: str | None = None  # why its runtime info could not be read

    @property
    def role(self) -> str:
        return self.runtime.get("brokerRole") or ("MASTER" if self.broker_id == 0 else "SLAVE")

    @property
    def version(self) -> str:
        return self.runtime.get("brokerVersionDesc", "-")

    @property
    def in_tps(self) -> str:
        return first_tps(self.runtime.get("putTps"))

    @property
    def out_tps(self) -> str:
        info = self.runtime
        return first_tps(info.get("getTransferedTps") or info.get("getTransferredTps"))

    @property
    def disk_ratio(self) -> str:
        ratio = self.runtime.get("commitLogDiskRatio")
        try:
            return f"{float(ratio) * 100:.1f} %" if ratio is not None else "-"
        except ValueError:
            return "-"


async def broker_rows(admin: Admin) -> list[BrokerRow]:
    """Each member of each cluster, with its runtime info (or why there is none)."""
    summary = await admin.cluster_info()
    rows = []
    for cluster, names in summary.clusters.items():
        for name in names:
            broker = summary.brokers.get(name)
            for broker_id, address in sorted((broker.addresses if broker else {}).items()):
                row = BrokerRow(cluster, name, broker_id, address, {})
                try:
                    row.runtime = await admin.broker_runtime_info(address)
                except RocketMQError as exc:  # one silent broker must not hide the others
                    row.error = str(exc).splitlines()[0]
                rows.append(row)
    return rows


async def cluster_page(request: Request) -> Response:
    async with admin_of(request) as admin:
        rows = await broker_rows(admin)
    return render(request, "cluster.html", {"brokers": rows, "page": "cluster"})


routes = [Route("/", cluster_page, name="cluster")]
