import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing
import TestSupport

/// FirmwareUpgradeManager against the in-memory simulated device (MCUboot swap with test / confirm /
/// revert, a reboot of ~0.3 s during which requests are lost).
@Suite("FirmwareUpgradeManager")
struct FirmwareUpgradeManagerTests {
    // MARK: Modes

    @Test func confirmOnlyInstallsTheImageConfirmed() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let recorder = EventRecorder(manager)
        let result = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.confirmOnly))

        let slot = try #require(rig.device.slot(holding: image.hash))
        #expect(slot.slot == 0 && slot.active && slot.confirmed)
        #expect(rig.device.resetCount == 1)
        #expect(result.summary.uploadedImages == [0])
        #expect(result.summary.didReset)
        #expect(result.images.first?.uploaded == true)
        #expect(result.images.first?.bytesSent == image.size)
        #expect(result.finalImages.contains { $0.active && $0.confirmed && $0.hash == image.hash })
        await recorder.wait { if case .completed = $0 { true } else { false } }
        #expect(recorder.states == [
            .requestMcuMgrParameters, .bootloaderInfo, .validate, .upload, .confirm, .reset, .reconnect, .success,
        ])
        let last = try #require(recorder.progress.last)
        #expect(last.bytesSent == image.size && last.imageSize == image.size && last.totalBytesSent == image.size)
    }

    @Test func testAndConfirmConfirmsAfterTheTestBoot() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let recorder = EventRecorder(manager)
        let result = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.testAndConfirm))

        let slot = try #require(rig.device.slot(holding: image.hash))
        #expect(slot.slot == 0 && slot.active && slot.confirmed)
        #expect(result.summary.didReset)
        await recorder.wait { if case .completed = $0 { true } else { false } }
        #expect(recorder.states == [
            .requestMcuMgrParameters, .bootloaderInfo, .validate, .upload, .test, .reset, .reconnect, .confirm, .success,
        ])
        // Confirmed: a power cycle keeps it.
        rig.device.powerCycle()
        #expect(rig.device.slot(holding: image.hash)?.slot == 0)
    }

    @Test func testOnlyRunsTheImageUnconfirmedAndTheNextResetRevertsIt() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let original = try #require(rig.device.imageSlots.first { $0.active }).hash
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        _ = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.testOnly))

        let slot = try #require(rig.device.slot(holding: image.hash))
        #expect(slot.slot == 0 && slot.active && !slot.confirmed)
        rig.device.powerCycle()
        #expect(rig.device.imageSlots.first { $0.active }?.hash == original)
    }

    @Test func uploadOnlyLeavesTheImageInTheSecondarySlotWithoutReset() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let result = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.uploadOnly))

        let slot = try #require(rig.device.slot(holding: image.hash))
        #expect(slot.slot == 1 && !slot.pending && !slot.active)
        #expect(rig.device.resetCount == 0)
        #expect(!result.summary.didReset)
        #expect(result.finalImages.contains { $0.slot == 1 && $0.hash == image.hash })
    }

    @Test func noResetMarksTheImageAndLeavesTheResetToTheUser() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let result = try await manager.upgrade(
            images: [image], configuration: DFUFixtures.configuration(.confirmOnly) { $0.performReset = false })

        #expect(rig.device.resetCount == 0)
        let slot = try #require(rig.device.slot(holding: image.hash))
        #expect(slot.slot == 1 && slot.pending && slot.permanent)
        #expect(result.summary.notes.contains { $0.contains("next reset") })
        rig.device.powerCycle()
        #expect(rig.device.slot(holding: image.hash)?.active == true)
    }

    @Test func multiImageInstallsBothCores() async throws {
        let rig = ManagerRig { $0.imageCount = 2 }
        let app = DFUFixtures.image(number: 0)
        let net = DFUFixtures.image(number: 1, size: 12 * 1024)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let result = try await manager.upgrade(images: [app, net], configuration: DFUFixtures.configuration(.confirmOnly))

        #expect(result.summary.uploadedImages == [0, 1])
        #expect(rig.device.slot(holding: app.hash, image: 0)?.slot == 0)
        #expect(rig.device.slot(holding: net.hash, image: 1)?.slot == 0)
        #expect(rig.device.resetCount == 1)
    }

    @Test func eraseSettingsErasesTheStoragePartitionAfterTheUpload() async throws {
        let rig = ManagerRig()
        #expect(rig.device.setting("app/name") != nil)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let recorder = EventRecorder(manager)
        _ = try await manager.upgrade(
            images: [DFUFixtures.image()], configuration: DFUFixtures.configuration(.confirmOnly) { $0.eraseAppSettings = true })
        #expect(rig.device.setting("app/name") == nil)
        await recorder.wait { if case .completed = $0 { true } else { false } }
        #expect(recorder.states.contains(.eraseAppSettings))
    }

    // MARK: Validate

    @Test func anImageAlreadyRunningIsSkipped() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        _ = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.confirmOnly))
        rig.tap.resetCounters()

        let again = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.confirmOnly))
        #expect(again.summary.skippedImages == [0])
        #expect(again.summary.uploadedImages.isEmpty)
        #expect(!again.summary.didReset)
        #expect(rig.device.resetCount == 1)
        #expect(!rig.tap.sent.contains { $0.header.group == .image && $0.header.command == McuMgrCommand.Image.upload })
    }

    @Test func anImageAlreadyInTheSecondarySlotIsNotUploadedAgain() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        _ = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.uploadOnly))
        rig.tap.resetCounters()

        let result = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.testAndConfirm))
        #expect(result.summary.skippedImages == [0])
        #expect(!rig.tap.sent.contains { $0.header.group == .image && $0.header.command == McuMgrCommand.Image.upload })
        let slot = try #require(rig.device.slot(holding: image.hash))
        #expect(slot.slot == 0 && slot.active && slot.confirmed)
    }

    // MARK: Resume, pause, cancel

    /// Runs `action` as an image chunk beyond `offset` bytes goes out, until it returns true: before the
    /// device answers that chunk, so the manager hears of what `action` does first (its inputs are one
    /// stream, in order), however late a loaded machine runs the test's own tasks.
    static func once(_ rig: ManagerRig, asAChunkBeyond offset: Int, _ action: @escaping @Sendable () -> Bool) {
        let done = ManagerTestBox(false)
        rig.tap.rule.withValue {
            $0 = { packet in
                if packet.header.group == .image, packet.header.command == McuMgrCommand.Image.upload,
                    (smpBody(packet)["off"]?.int ?? 0) > offset, !done.current, action()
                {
                    done.withValue { $0 = true }
                }
                return .forward(packet.bytes)
            }
        }
    }

    @Test func pauseStopsSendingAfterTheInFlightChunksAndResumeContinuesFromTheDevicesOffset() async throws {
        let rig = ManagerRig()
        rig.link.options.latency = .milliseconds(3)
        let image = DFUFixtures.image(size: 160 * 1024)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        // Paused from the link, as the first chunk beyond 20 000 bytes goes out: the upload is then sure
        // to be under way. (Paused from the progress events, a loaded machine delivered them so late that
        // the whole upload had ended first, and no pause came.)
        Self.once(rig, asAChunkBeyond: 20_000) {
            manager.pause()
            return true
        }
        let recorder = EventRecorder(manager)
        let upgrade = Task { try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.uploadOnly)) }
        await recorder.wait { if case .paused = $0 { true } else { false } }
        #expect(manager.isPaused)
        // The chunks in flight drain: each is answered and the progress of the last answer has arrived.
        #expect(await waitUntil { uploadDrained(rig, recorder) })
        let sentWhilePaused = rig.tap.sent.count
        let progressWhilePaused = recorder.progress.count
        // Then nothing more goes out. An absence, checked over a window: the uploader holding (it waits
        // inside the manager) is not observable from here. Drained first, so a correct manager has
        // nothing left to send or report however slow the machine is; the window only gives a wrong
        // one the time to show itself.
        try await Task.sleep(for: .milliseconds(300))
        #expect(rig.tap.sent.count == sentWhilePaused, "nothing is sent while paused")
        #expect(recorder.progress.count == progressWhilePaused)
        let held = try #require(recorder.progress.last).bytesSent
        #expect(held < image.size)

        manager.resume()
        let result = try await upgrade.value
        #expect(!manager.isPaused)
        #expect(rig.device.slot(holding: image.hash)?.slot == 1)
        #expect(result.images[0].resumedFrom == 0)
        // The upload went on where it stood: every byte was sent once.
        let uploadChunks = rig.tap.sent.filter { $0.header.group == .image && $0.header.command == McuMgrCommand.Image.upload }
        let dataBytes = uploadChunks.reduce(0) { $0 + (smpBody($1)["data"]?.byteString?.count ?? 0) }
        let offsets = uploadChunks.compactMap { smpBody($0)["off"]?.int }
        #expect(dataBytes == image.size, "chunk offsets: \(offsets)")
        #expect(recorder.events.contains { if case .resumed = $0 { true } else { false } })
    }

    @Test func pauseBetweenStatesHoldsTheNextStep() async throws {
        let rig = ManagerRig()
        let image = DFUFixtures.image()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        // Paused as the test request goes out (the first image state write; the confirm after the reset
        // is the second): the pause reaches the manager before its answer does (one stream of inputs, in
        // order), however late the machine runs this test's tasks.
        let paused = ManagerTestBox(false)
        rig.tap.rule.withValue {
            $0 = { packet in
                if packet.header.group == .image, packet.header.command == McuMgrCommand.Image.state, packet.header.operation == .write,
                    !paused.withValue({ $0 })
                {
                    paused.withValue { $0 = true }
                    manager.pause()
                }
                return .forward(packet.bytes)
            }
        }
        let recorder = EventRecorder(manager)
        let upgrade = Task { try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.testAndConfirm)) }
        await recorder.wait { if case .paused = $0 { true } else { false } }
        // While paused the machine still reports its state changes but holds its actions: once the
        // test answer moved it to reset, the reset request is held until resumed.
        await recorder.wait { if case .stateChanged(_, .reset) = $0 { true } else { false } }
        #expect(manager.isPaused)
        #expect(!rig.tap.sent.contains { $0.header.group == .os && $0.header.command.rawValue == 5 })
        #expect(rig.device.resetCount == 0, "no reset while paused")
        manager.resume()
        _ = try await upgrade.value
        #expect(rig.device.resetCount == 1)
    }

    @Test func cancelEndsWithUpgradeDidCancelAndTheNextUpgradeResumes() async throws {
        let rig = ManagerRig()
        rig.link.options.latency = .milliseconds(3)
        let image = DFUFixtures.image(size: 160 * 1024)
        let delegate = RecordingDelegate()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options, delegate: delegate)
        // Cancelled as the first chunk beyond 40 000 bytes goes out (see the pause test above).
        Self.once(rig, asAChunkBeyond: 40_000) {
            manager.cancel()
            return true
        }
        let recorder = EventRecorder(manager)
        let error = await expectMcuMgrError {
            _ = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.confirmOnly))
        }
        #expect(error?.kind == .cancelled)
        #expect(delegate.calls.current.last == "cancel upload")
        await recorder.wait { if case .cancelled = $0 { true } else { false } }
        // Consistent: the device still runs its image, nothing pending, no reset (once every request that
        // went out before the cancel has reached it).
        #expect(await waitUntil { rig.link.handledRequests == rig.tap.sent.count })
        #expect(rig.device.resetCount == 0)
        #expect(rig.device.imageSlots.allSatisfy { !$0.pending })
        #expect(rig.device.slot(holding: image.hash) == nil)
        #expect(!manager.isInProgress)

        // A new upgrade continues from the device's offset.
        let result = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.confirmOnly))
        #expect(result.images[0].resumedFrom > 40_000)
        #expect(result.images[0].bytesSent == image.size - result.images[0].resumedFrom)
        #expect(rig.device.slot(holding: image.hash)?.active == true)
    }

    @Test func cancellingTheCallingTaskCancelsTheUpgrade() async throws {
        let rig = ManagerRig()
        rig.link.options.latency = .milliseconds(3)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        // The task is cancelled as the first chunk beyond 20 000 bytes goes out (see the pause test).
        let upgradeTask = ManagerTestBox<Task<FirmwareUpgradeResult, any Error>?>(nil)
        Self.once(rig, asAChunkBeyond: 20_000) {
            guard let task = upgradeTask.current else { return false }
            task.cancel()
            return true
        }
        let upgrade = Task {
            try await manager.upgrade(images: [DFUFixtures.image(size: 160 * 1024)], configuration: DFUFixtures.configuration())
        }
        upgradeTask.withValue { $0 = upgrade }
        let error = await expectMcuMgrError { _ = try await upgrade.value }
        #expect(error?.kind == .cancelled)
        #expect(rig.device.resetCount == 0)
    }

    @Test func aSecondUpgradeWhileOneRunsIsRefused() async throws {
        let rig = ManagerRig()
        rig.link.options.latency = .milliseconds(3)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        // The first upgrade's chunks are lost until the second was refused: it cannot end before (on a
        // loaded machine, polling for it to be in progress saw it only after it had ended).
        let refused = ManagerTestBox(false)
        rig.tap.rule.withValue {
            $0 = { packet in
                if packet.header.group == .image, packet.header.command == McuMgrCommand.Image.upload, !refused.current { return .drop }
                return .forward(packet.bytes)
            }
        }
        let first = Task { try await manager.upgrade(images: [DFUFixtures.image(size: 96 * 1024)], configuration: DFUFixtures.configuration(.uploadOnly)) }
        #expect(await waitUntil(interval: .milliseconds(1)) { manager.isInProgress })
        let error = await expectMcuMgrError {
            _ = try await manager.upgrade(images: [DFUFixtures.image()], configuration: DFUFixtures.configuration())
        }
        refused.withValue { $0 = true }
        #expect(error?.kind == .usage)
        _ = try await first.value
    }

    // MARK: Failures

    @Test func aDeviceErrorMidUploadFailsClearly() async throws {
        let rig = ManagerRig()
        let chunks = ManagerTestBox(0)
        rig.tap.rule.withValue {
            $0 = { packet in
                guard packet.header.group == .image, packet.header.command == McuMgrCommand.Image.upload else {
                    return .forward(packet.bytes)
                }
                let n = chunks.withValue { c -> Int in c += 1; return c }
                // FLASH_WRITE_FAILED from the fifth chunk on. On every later chunk too: the tap answers on
                // another queue than the link, so with chunks pipelined the device's answer to the sixth
                // can come first, move the upload back to the fifth's offset and send it again, and the
                // one error would then answer an abandoned request (ignored, rightly).
                return n >= 5 ? .reply(["err": ["group": 1, "rc": 12]]) : .forward(packet.bytes)
            }
        }
        let delegate = RecordingDelegate()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options, delegate: delegate)
        let error = await expectMcuMgrError {
            _ = try await manager.upgrade(images: [DFUFixtures.image(size: 64 * 1024)], configuration: DFUFixtures.configuration())
        }
        #expect(error?.kind == .device)
        #expect(error?.groupError?.rc == 12)
        #expect(error?.message.contains("upload") == true)
        #expect(error?.message.contains("Run the upgrade again") == true)
        #expect((error?.cause as? FirmwareUpgradeFailure)?.state == .upload, "the machine's failure is the cause")
        #expect(delegate.calls.current.last == "fail upload")
        #expect(rig.device.resetCount == 0)
    }

    @Test func aDeviceThatNeverComesBackFailsWithATimeout() async throws {
        let rig = ManagerRig()
        let link = rig.link
        rig.device.setResetObserver { _ in link.options.silent = true }
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let recorder = EventRecorder(manager)
        let error = await expectMcuMgrError {
            _ = try await manager.upgrade(
                images: [DFUFixtures.image()],
                configuration: DFUFixtures.configuration(.testAndConfirm) { $0.reconnectTimeout = .milliseconds(1500) })
        }
        #expect(error?.kind == .timeout)
        #expect(error?.message.contains("did not come back within") == true)
        await recorder.wait { if case .failed = $0 { true } else { false } }
        let failedIn = recorder.events.compactMap { if case .failed(let state, _) = $0 { state } else { nil } }
        #expect(failedIn == [.reconnect])
    }

    @Test func aDeviceThatBootsTheOldImageFailsClearly() async throws {
        let rig = ManagerRig()
        // MCUboot does not boot a non-bootable image: the old one keeps running.
        let image = DFUFixtures.image(flags: .nonBootable)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let error = await expectMcuMgrError {
            _ = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.testAndConfirm))
        }
        #expect(error?.kind == .device)
        #expect(error?.message.contains("booted the old image") == true)
        #expect(rig.device.resetCount == 1)
    }

    @Test func aRefusedResetFailsClearly() async throws {
        let rig = ManagerRig()
        rig.tap.rule.withValue {
            $0 = { packet in
                packet.header.group == .os && packet.header.command.rawValue == 5 ? .reply(["rc": 10]) : .forward(packet.bytes)
            }
        }
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let error = await expectMcuMgrError {
            _ = try await manager.upgrade(images: [DFUFixtures.image()], configuration: DFUFixtures.configuration())
        }
        #expect(error?.kind == .device)
        #expect(error?.message.contains("refused the reset") == true)
    }

    // MARK: Reconnection, events, delegate

    @Test func theReconnectionStrategyProvidesTheTransportAfterTheReset() async throws {
        let rig = ManagerRig()
        let calls = ManagerTestBox(0)
        let link = rig.link
        let strategy = FirmwareUpgradeReconnection { previous in
            let n = calls.withValue { c -> Int in c += 1; return c }
            // The first attempt finds nothing (a serial port not back yet).
            if n == 1 { throw McuMgrError(.transport, "not there yet") }
            #expect(previous === rig.tap)
            return link
        }
        let manager = FirmwareUpgradeManager(client: rig.client, reconnection: strategy, options: DFUFixtures.options)
        let image = DFUFixtures.image()
        _ = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.testAndConfirm))
        #expect(calls.current == 2)
        #expect(await manager.client.transport === link)
        #expect(rig.device.slot(holding: image.hash)?.confirmed == true)
    }

    /// Firmware-loader mode with the loader reached through a transport of its own (Bluetooth LE: another
    /// peripheral): the loader's link is closed when the application comes back, and the application's
    /// link is the caller's client again, so that closing it ends the last link (on real BlueZ the
    /// device stayed connected after `smp dfu`, which closed only its own, already closed client).
    @Test func afterTheFirmwareLoaderTheCallersClientCarriesTheApplicationLink() async throws {
        let rig = ManagerRig { $0.bootloader.mode = .firmwareLoader }
        let loader = OpenCloseCountingTransport(InMemorySimulatorTransport(device: rig.device))
        let targets = ManagerTestBox<[FirmwareUpgradeReconnectionTarget]>([])
        let strategy = FirmwareUpgradeReconnection(targeting: { [tap = rig.tap] _, target in
            targets.withValue { $0.append(target) }
            switch target {
            case .firmwareLoader: return loader
            case .application: return tap
            }
        })
        let manager = FirmwareUpgradeManager(client: rig.client, reconnection: strategy, options: DFUFixtures.options)
        let image = DFUFixtures.image(seed: 12)
        _ = try await manager.upgrade(
            images: [image], configuration: DFUFixtures.configuration(.confirmOnly) { $0.firmwareLoaderName = "FL_UNIT1" })
        #expect(targets.current == [.firmwareLoader(name: "FL_UNIT1"), .application], "\(targets.current)")
        #expect(loader.opens >= 1 && loader.closes == loader.opens, "opened \(loader.opens), closed \(loader.closes)")
        #expect(await manager.client === rig.client)
        #expect(rig.device.slot(holding: image.hash)?.slot == 0)
        // The caller's client is the one in use: it answers, and closing it closes the last link.
        _ = try await DefaultManager(client: rig.client).echo("back")
        await rig.client.close()
        #expect(loader.closes == loader.opens)
    }

    @Test func theDelegateGetsTheIOSCallsInOrder() async throws {
        let rig = ManagerRig()
        let delegate = RecordingDelegate()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options, delegate: delegate)
        let image = DFUFixtures.image()
        _ = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.confirmOnly))
        let calls = delegate.calls.current
        #expect(calls.first == "start")
        #expect(calls.last == "complete")
        #expect(calls.contains("state none->requestMcuMgrParameters"))
        #expect(calls.contains("state reconnect->success"))
        #expect(calls.contains("progress \(image.size)/\(image.size)"))
    }

    @Test func startRunsTheUpgradeInItsOwnTaskLikeTheIOSLibrary() async throws {
        let rig = ManagerRig()
        let delegate = RecordingDelegate()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options, delegate: delegate)
        let image = DFUFixtures.image()
        let package = try McuMgrPackage(data: image.data, fileName: "app.bin")
        let task = manager.start(package: package, using: DFUFixtures.configuration(.testAndConfirm))
        let result = try await task.value
        #expect(result.summary.uploadedImages == [0])
        #expect(delegate.calls.current.last == "complete")
        #expect(rig.device.slot(holding: image.hash)?.confirmed == true)
    }

    @Test func theProgressRateAndTotalsAreReported() async throws {
        let rig = ManagerRig { $0.imageCount = 2 }
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let recorder = EventRecorder(manager)
        let app = DFUFixtures.image(number: 0)
        let net = DFUFixtures.image(number: 1)
        _ = try await manager.upgrade(images: [app, net], configuration: DFUFixtures.configuration(.uploadOnly))
        await recorder.wait { if case .completed = $0 { true } else { false } }
        let progress = recorder.progress
        #expect(progress.allSatisfy { $0.totalSize == app.size + net.size })
        #expect(progress.last?.totalBytesSent == app.size + net.size)
        #expect(progress.contains { $0.image == 1 && $0.totalBytesSent > app.size })
        #expect(progress.allSatisfy { ($0.bytesPerSecond ?? 0) >= 0 })
        let totals = progress.map(\.totalBytesSent)
        #expect(totals == totals.sorted(), "progress only moves forward")
    }

    @Test func aGivenBootloaderModeSkipsTheQuestion() async throws {
        let rig = ManagerRig()
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let result = try await manager.upgrade(
            images: [DFUFixtures.image()],
            configuration: DFUFixtures.configuration(.confirmOnly) { $0.bootloaderMode = .swapWithoutScratch })
        #expect(result.summary.bootloaderMode == .swapWithoutScratch)
        #expect(!rig.tap.sent.contains { $0.header.group == .os && $0.header.command.rawValue == 8 })
    }

    // MARK: Direct-XIP, SUIT

    @Test func directXIPUploadsTheBuildForTheInactiveSlot() async throws {
        let rig = ManagerRig { $0.bootloader.mode = .directXIPWithRevert }
        let configuration = SimulatorConfiguration()
        func build(_ slot: Int) -> McuMgrPackage.Image {
            let body = Data(managerTestBytes(20_000, seed: UInt64(40 + slot)))
            let image = try! McuMgrImageBuilder(
                version: McuMgrImageVersion(major: 1, minor: 1), loadAddress: configuration.slotAddress(image: 0, slot: slot),
                flags: .romFixed
            ).image(body: body)
            return McuMgrPackage.Image(
                image: 0, slot: slot, contentType: .mcubootImage, hash: image.hash, version: "1.1.0", data: image.data,
                fileName: "slot\(slot).bin")
        }
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let result = try await manager.upgrade(images: [build(0), build(1)], configuration: DFUFixtures.configuration(.testAndConfirm))
        #expect(result.images.first { $0.slot == 1 }?.uploaded == true)
        #expect(result.images.first { $0.slot == 0 }?.uploaded == false)
        let running = try #require(rig.device.imageSlots.first { $0.active })
        #expect(running.slot == 1 && running.confirmed && running.hash == Array(build(1).hash))
    }

    @Test func suitEnvelopeServesTheResourceTheDeviceAsksFor() async throws {
        let rig = ManagerRig { $0.suit = SimulatedSUITConfiguration() }
        let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 2, applicationSize: 6000)
        let package = try McuMgrPackage(data: Data(envelope.bytes), fileName: "root.suit")
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let recorder = EventRecorder(manager)

        // Without the resource: a clear file error naming it.
        let error = await expectMcuMgrError { _ = try await manager.upgrade(package) }
        #expect(error?.kind == .file)
        #expect(error?.message.contains("file://app.bin") == true)

        let app = Data(try #require(envelope.detachedResources["file://app.bin"]))
        let result = try await manager.upgrade(package, resources: ["app.bin": app])
        #expect(result.summary.uploadedImages == [0])
        #expect(rig.device.suitRootManifest?.sequenceNumber == 2)
        #expect(rig.device.suitInstalledResources["file://app.bin"] == Array(app))
        #expect(recorder.logs.contains { $0.contains("asks for resource file://app.bin") })
    }
}

/// Whether the upload chunks in flight have drained: each one sent has been answered, and the
/// progress event of the furthest answer has reached the recorder (progress is reported per answer).
func uploadDrained(_ rig: ManagerRig, _ recorder: EventRecorder) -> Bool {
    let isUpload = { (packet: SMPPacket) in packet.header.group == .image && packet.header.command == McuMgrCommand.Image.upload }
    let sent = rig.tap.sent.filter(isUpload).count
    let answers = rig.tap.received.filter(isUpload)
    guard answers.count == sent, let offset = answers.compactMap({ smpBody($0)["off"]?.int }).max() else { return false }
    return recorder.progress.last?.bytesSent == offset
}

/// FirmwareUpgradeManager against a simulated single-application MCUboot: the application answers the
/// image group with rc 8; a reset with boot mode 1 enters serial recovery.
@Suite("FirmwareUpgradeManager on single-application MCUboot")
struct FirmwareUpgradeManagerSingleApplicationTests {
    static func rig(serialRecovery: Bool = true) -> ManagerRig {
        ManagerRig { $0.bootloader = SimulatedBootloader(mode: .singleApplication, serialRecovery: serialRecovery) }
    }

    @Test func theUpgradeGoesThroughSerialRecoveryAndTheApplicationRunsTheNewImage() async throws {
        let rig = Self.rig()
        let image = DFUFixtures.image(seed: 5)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let recorder = EventRecorder(manager)
        let result = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.confirmOnly))
        #expect(rig.device.runMode == .application)
        #expect(rig.device.resetCount == 2, "one reset into recovery, one to boot the image")
        let slot = try #require(rig.device.slot(holding: image.hash))
        #expect(slot.slot == 0)
        #expect(result.summary.serialRecovery)
        #expect(result.summary.bootloaderMode == .singleApplication)
        #expect(result.summary.uploadedImages == [0])
        let verified = try #require(result.summary.verified)
        #expect(verified.contains(image.hash.map { String(format: "%02x", $0) }.joined()) && verified.contains("rc 8"), "\(verified)")
        // What recovery listed before the reset: slot 0 with the new hash.
        #expect(result.finalImages.contains { $0.slot == 0 && $0.hash == image.hash })
        await recorder.wait { if case .completed = $0 { true } else { false } }
        #expect(recorder.states == [
            .requestMcuMgrParameters, .bootloaderInfo, .validate, .reset, .reconnect, .validate, .upload, .reset, .reconnect, .success,
        ])
        #expect(recorder.logs.contains { $0.contains("into MCUboot's serial recovery (boot mode 1)") })
    }

    @Test func aDeviceWithoutSerialRecoveryFailsClearlyAfterOneReset() async throws {
        let rig = Self.rig(serialRecovery: false)
        let manager = FirmwareUpgradeManager(client: rig.client, options: DFUFixtures.options)
        let error = await expectMcuMgrError {
            _ = try await manager.upgrade(images: [DFUFixtures.image(seed: 6)], configuration: DFUFixtures.configuration(.confirmOnly))
        }
        #expect(error?.kind == .device)
        #expect(error?.returnCode == .notSupported)
        #expect(error?.message.contains("did not enter MCUboot's serial recovery") == true, "\(String(describing: error))")
        #expect(rig.device.resetCount == 1)
    }
}

/// Counts how often a transport was opened and closed.
final class OpenCloseCountingTransport: McuMgrTransport, @unchecked Sendable {
    let inner: any McuMgrTransport
    private let counts = ManagerTestBox((opens: 0, closes: 0))
    init(_ inner: any McuMgrTransport) { self.inner = inner }
    var opens: Int { counts.current.opens }
    var closes: Int { counts.current.closes }
    var name: String { inner.name }
    var linkLimits: LinkLimits { inner.linkLimits }
    func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        counts.withValue { $0.opens += 1 }
        try await inner.open(handler)
    }
    func send(_ bytes: [UInt8]) throws { try inner.send(bytes) }
    func close() async {
        counts.withValue { $0.closes += 1 }
        await inner.close()
    }
}
