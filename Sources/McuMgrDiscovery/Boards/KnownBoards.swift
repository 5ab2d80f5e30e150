/// Built-in knowledge of boards, debug probes and USB serial adapters.
///
/// Sources: the IDs marked "probe-rs rules" appear in probe-rs's udev rules (69-probe-rs.rules, derived
/// from OpenOCD's); "nrf-udev" in Nordic's nrf-udev rules and rules files that copy them; "openocd-esp32"
/// in Espressif's OpenOCD rules; "widely used rules" in many projects' udev rules files. Entries marked
/// "unverified" come from general knowledge and may be wrong; users can override any entry (see README,
/// "Board table").
public enum KnownBoards {
    public static let rules: [BoardRule] = nordic + segger + cmsisDAP + stm + nxp + espressif + raspberryPi
        + zephyr + adapters

    static let nordic: [BoardRule] = [
        BoardRule(
            vendorID: 0x1915, productID: 0x520f, name: "Nordic USB CDC-ACM (nRF Connect SDK)", kind: .board,
            smp: .likely, role: "the nRF SoC's own USB, e.g. MCUmgr over CDC-ACM or MCUboot serial recovery",
            source: "nrf-udev (1915:520f)"),
        BoardRule(
            vendorID: 0x1915, productID: 0x521f, name: "nRF52840 Dongle (Open DFU bootloader)", kind: .board,
            smp: .unlikely, role: "Nordic's legacy DFU bootloader, not SMP; use nrfutil",
            source: "widely used rules (nRF52840 Dongle in bootloader mode)"),
        BoardRule(
            vendorID: 0x1915, productID: 0xc00a, name: "nRF52840 Dongle (nRF Connect SDK CDC-ACM)", kind: .board,
            smp: .possible, source: "unverified"),
        BoardRule(vendorID: 0x1915, name: "Nordic Semiconductor USB device", kind: .board, smp: .possible, source: "nrf-udev (vendor 1915)"),
    ]

    /// SEGGER J-Link, standalone and on-board (J-Link OB on Nordic nRF52/53/54/91 DKs). Each CDC port uses two
    /// USB interfaces; the tty sits on the first, so VCOM0, VCOM1, VCOM2 are interfaces 0, 2, 4.
    static let segger: [BoardRule] = {
        var rules = [
            BoardRule(vendorID: 0x1366, name: "SEGGER J-Link", kind: .debugProbe, source: "probe-rs rules (vendor 1366)"),
            BoardRule(
                vendorID: 0x1366, productID: 0x1015, name: "SEGGER J-Link OB (nRF52 DK and similar)", kind: .debugProbe,
                role: "VCOM: the target's UART", source: "probe-rs rules; widely used rules (nRF52840 DK)"),
        ]
        for product: UInt16 in [0x1051, 0x1055, 0x1061] {
            let name = "SEGGER J-Link OB (nRF53/nRF54/nRF91 DK and similar)"
            let source = product == 0x1055 ? "unverified" : "probe-rs rules (1366:\(hex4(product)))"
            rules.append(BoardRule(vendorID: 0x1366, productID: product, name: name, kind: .debugProbe, source: source))
            rules.append(
                BoardRule(
                    vendorID: 0x1366, productID: product, interfaceNumber: 0, name: name, kind: .debugProbe,
                    smp: .possible, role: "VCOM0: the application UART on Nordic DKs", source: source + "; role unverified"))
            rules.append(
                BoardRule(
                    vendorID: 0x1366, productID: product, interfaceNumber: 2, name: name, kind: .debugProbe,
                    smp: .possible, role: "VCOM1: a second UART (nRF5340 DK: network core; nRF91 DK: UART1)",
                    source: source + "; role unverified"))
            rules.append(
                BoardRule(
                    vendorID: 0x1366, productID: product, interfaceNumber: 4, name: name, kind: .debugProbe,
                    smp: .possible, role: "VCOM2: the board controller's UART on nRF91 DKs",
                    source: source + "; role unverified"))
        }
        return rules
    }()

    static let cmsisDAP: [BoardRule] = [
        BoardRule(
            vendorID: 0x0d28, productID: 0x0204, name: "Arm DAPLink (CMSIS-DAP)", kind: .debugProbe,
            role: "VCOM: the target's UART", source: "unverified (Arm mbed DAPLink 0d28:0204)"),
        BoardRule(vendorID: 0x0d28, name: "Arm mbed / DAPLink device", kind: .debugProbe, source: "unverified"),
    ]

    static let stm: [BoardRule] =
        [
            (0x3748, "ST-LINK/V2"), (0x374b, "ST-LINK/V2-1"), (0x3752, "ST-LINK/V2-1"), (0x374d, "STLINK-V3"),
            (0x374e, "STLINK-V3"), (0x374f, "STLINK-V3"), (0x3753, "STLINK-V3"), (0x3754, "STLINK-V3"),
        ].map { (product: UInt16, name: String) in
            BoardRule(
                vendorID: 0x0483, productID: product, name: "STMicroelectronics \(name)", kind: .debugProbe,
                role: "VCP: the target's UART (ST-LINK/V2 has none)", source: "probe-rs rules (0483:\(hex4(product)))")
        } + [
            BoardRule(
                vendorID: 0x0483, productID: 0x5740, name: "STM32 USB CDC (Virtual COM Port)", kind: .board,
                source: "unverified"),
        ]

    static let nxp: [BoardRule] = [
        BoardRule(
            vendorID: 0x1fc9, productID: 0x0143, name: "NXP MCU-Link", kind: .debugProbe, role: "VCOM: the target's UART",
            source: "widely used rules (1fc9:0143)"),
        BoardRule(
            vendorID: 0x1fc9, productID: 0x0090, name: "NXP LPC-Link2 (CMSIS-DAP)", kind: .debugProbe,
            role: "VCOM: the target's UART", source: "widely used rules (1fc9:0090)"),
        BoardRule(vendorID: 0x1fc9, name: "NXP USB device", kind: .board, source: "unverified"),
    ]

    static let espressif: [BoardRule] = [
        BoardRule(
            vendorID: 0x303a, productID: 0x1001, name: "Espressif USB Serial/JTAG", kind: .board,
            role: "the ESP32-C3/S3/C6/H2's built-in USB serial; it re-enumerates when the chip resets",
            source: "probe-rs rules; openocd-esp32 (303a:1001)"),
        BoardRule(
            vendorID: 0x303a, productID: 0x1002, name: "Espressif USB Bridge", kind: .debugProbe,
            source: "probe-rs rules (303a:1002)"),
        BoardRule(vendorID: 0x303a, name: "Espressif USB device", kind: .board, source: "unverified"),
    ]

    static let raspberryPi: [BoardRule] = [
        BoardRule(
            vendorID: 0x2e8a, productID: 0x000c, name: "Raspberry Pi Debug Probe (CMSIS-DAP)", kind: .debugProbe,
            role: "VCOM: the target's UART", source: "widely used rules (2e8a:000c)"),
        BoardRule(vendorID: 0x2e8a, productID: 0x000a, name: "Raspberry Pi Pico (USB CDC)", kind: .board, source: "unverified"),
    ]

    static let zephyr: [BoardRule] = [
        BoardRule(
            vendorID: 0x2fe3, name: "Zephyr USB device (default Zephyr VID)", kind: .board, smp: .possible,
            role: "a Zephyr application's own USB (e.g. CDC-ACM with an SMP transport)",
            source: "nrf-udev (vendor 2fe3)"),
    ]

    static let adapters: [BoardRule] = [
        BoardRule(vendorID: 0x0403, name: "FTDI USB serial", kind: .usbSerialAdapter, source: "unverified (vendor 0403)"),
        BoardRule(vendorID: 0x0403, productID: 0x6001, name: "FTDI FT232R USB UART", kind: .usbSerialAdapter, source: "widely used rules (0403:6001)"),
        BoardRule(vendorID: 0x0403, productID: 0x6010, name: "FTDI FT2232 dual USB UART", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x0403, productID: 0x6011, name: "FTDI FT4232 quad USB UART", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x0403, productID: 0x6014, name: "FTDI FT232H USB UART", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x0403, productID: 0x6015, name: "FTDI FT-X USB UART", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x10c4, name: "Silicon Labs USB serial", kind: .usbSerialAdapter, source: "unverified (vendor 10c4)"),
        BoardRule(vendorID: 0x10c4, productID: 0xea60, name: "Silicon Labs CP210x UART Bridge", kind: .usbSerialAdapter, source: "widely used rules (10c4:ea60)"),
        BoardRule(vendorID: 0x10c4, productID: 0xea70, name: "Silicon Labs CP2105 dual UART Bridge", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x10c4, productID: 0xea71, name: "Silicon Labs CP2108 quad UART Bridge", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x1a86, name: "WCH USB serial", kind: .usbSerialAdapter, source: "unverified (vendor 1a86)"),
        BoardRule(vendorID: 0x1a86, productID: 0x7523, name: "WCH CH340 USB serial", kind: .usbSerialAdapter, source: "widely used rules (1a86:7523)"),
        BoardRule(vendorID: 0x1a86, productID: 0x5523, name: "WCH CH341 USB serial", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x1a86, productID: 0x55d4, name: "WCH CH9102 USB serial", kind: .usbSerialAdapter, source: "unverified"),
        BoardRule(vendorID: 0x067b, productID: 0x2303, name: "Prolific PL2303 USB serial", kind: .usbSerialAdapter, source: "unverified"),
    ]
}
