import McuMgrDBus
