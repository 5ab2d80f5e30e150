import McuMgrCore
