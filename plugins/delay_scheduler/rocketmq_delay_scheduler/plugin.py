"""Hook implementations of the delay_scheduler plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.registry import bound_to_app


@hookimpl
def rocketmq_register_put_hooks(register):
    from .hook import DelayPutHook

    register("delay", DelayPutHook)


@hookimpl
def rocketmq_register_broker_services(register):
    from .levels import DelayLevelService
    from .timers import TimerService

    register("delay_levels", DelayLevelService)
    register("timer_wheel", TimerService)


@hookimpl
def rocketmq_register_processors(register):
    from .processors import get_all_delay_offset, get_timer_check_point, recall_message

    register(RequestCode.RECALL_MESSAGE, bound_to_app(recall_message), server="broker")
    register(RequestCode.GET_ALL_DELAY_OFFSET, bound_to_app(get_all_delay_offset), server="broker")
    register(
        RequestCode.GET_TIMER_CHECK_POINT, bound_to_app(get_timer_check_point), server="broker"
    )
