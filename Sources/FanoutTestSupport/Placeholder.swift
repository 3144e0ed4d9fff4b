import FanoutCore
