import Testing
import TestSupport

@testable import McuMgrCore

/// The file-upload machine, tested by the actions it returns for each event: every path the upload of
/// a file can take, from the resume check to the verification and its restarts.
@Suite struct SMPFileUploadMachineTests {
    typealias Machine = SMPFileUploadMachine
    typealias Action = SMPFileUploadMachine.Action

    /// The local file's SHA-256 (any bytes: the machine only compares).
    static let whole: [UInt8] = [0xAA, 0xBB]
    /// The local file's first 400 bytes' SHA-256.
    static let prefix: [UInt8] = [0x40, 0x00]
    static let other: [UInt8] = [0x0B, 0xAD]

    static func machine(
        total: Int = 1000, verify: Bool = true, resume: Bool = true, mayHoldStart: Bool = true, worth: Bool = true
    ) -> Machine {
        Machine(
            plan: .init(
                total: total, verify: verify, resume: resume, deviceMayHoldStart: mayHoldStart,
                worthCheckingForResume: worth))
    }

    /// A machine for an upload without the resume check, sent from offset 0 and reported uploaded.
    static func uploadedFresh(total: Int = 1000, verify: Bool = true) -> (Machine, [Action]) {
        var m = machine(total: total, verify: verify, worth: false)
        #expect(m.start() == [.beginUpload, .upload(from: 0)])
        let actions = m.handle(.uploaded)
        return (m, actions)
    }

    @Test func aFreshUploadIsVerifiedByOneHashOfTheWholeFile() {
        var (m, actions) = Self.uploadedFresh()
        #expect(actions == [.transferEnded, .hash(length: nil)])
        #expect(m.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.whole))) == [.localDigest(type: "sha256", length: 1000)])
        #expect(m.handle(.localDigest(Self.whole)) == [.finish(.sha256, resumedFrom: 0)])
        #expect(m.resumedFrom == 0 && !m.restarted && m.completions == 0)
        // Done: later events change nothing.
        #expect(m.handle(.uploaded) == [])
    }

    @Test func aWholeFileHashOfAnotherLengthOrTypeGoesTheLongWay() {
        // The device still had the file open (its hash covers what was committed): close, length, hash.
        var (open, _) = Self.uploadedFresh()
        #expect(open.handle(.hashed(.digest(type: "sha256", length: 0, output: Self.other))) == [.close, .status])
        #expect(open.handle(.status(.length(1000))) == [.transferEnded, .hash(length: nil)])
        #expect(open.handle(.hashed(.digest(type: "crc32", length: 1000, output: [1, 2, 3, 4]))) == [.localDigest(type: "crc32", length: 1000)])
        #expect(open.handle(.localDigest([1, 2, 3, 4])) == [.finish(.crc32, resumedFrom: 0)])

        // A type this side cannot compute, or one it cannot compute locally, settles nothing either.
        var unknown = Self.uploadedFresh().0
        #expect(unknown.handle(.hashed(.digest(type: "md5", length: 1000, output: Self.whole))) == [.close, .status])
        var local = Self.uploadedFresh().0
        _ = local.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.whole)))
        #expect(local.handle(.localDigest(nil)) == [.close, .status])
        // An answer without output, too.
        var noOutput = Self.uploadedFresh().0
        #expect(noOutput.handle(.hashed(.digest(type: "sha256", length: 1000, output: nil))) == [.close, .status])
    }

    @Test func aMatchingPrefixIsResumedFrom() {
        var m = Self.machine()
        #expect(m.start() == [.close, .status])
        #expect(m.handle(.status(.length(400))) == [.hash(length: 400)])
        #expect(m.handle(.hashed(.digest(type: "sha256", length: 400, output: Self.prefix))) == [.localDigest(type: "sha256", length: 400)])
        #expect(m.handle(.localDigest(Self.prefix)) == [.beginUpload, .upload(from: 400)])
        #expect(m.resumedFrom == 400)
        // Not sent from offset 0: the device did not get the length, so the long way checks it.
        #expect(m.handle(.uploaded) == [.close, .status])
        #expect(m.handle(.status(.length(1000))) == [.transferEnded, .hash(length: nil)])
        #expect(m.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.whole))) == [.localDigest(type: "sha256", length: 1000)])
        #expect(m.handle(.localDigest(Self.whole)) == [.finish(.sha256, resumedFrom: 400)])
    }

    @Test func theWholeFileOnTheDeviceIsVerifiedByThePrefixHash() {
        var m = Self.machine()
        _ = m.start()
        #expect(m.handle(.status(.length(1000))) == [.hash(length: 1000)])
        #expect(m.handle(.hashed(.digest(type: "crc32", length: 1000, output: Self.whole))) == [.localDigest(type: "crc32", length: 1000)])
        // No upload and no beginUpload; no transfer end: the whole duration counts.
        #expect(m.handle(.localDigest(Self.whole)) == [.reportComplete, .finish(.crc32, resumedFrom: 1000)])

        // Without verify the upload still checks the length the long way (nothing to send).
        var unverified = Self.machine(verify: false)
        _ = unverified.start()
        _ = unverified.handle(.status(.length(1000)))
        _ = unverified.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.whole)))
        #expect(unverified.handle(.localDigest(Self.whole)) == [.beginUpload, .reportComplete, .close, .status])
        #expect(unverified.handle(.status(.length(1000))) == [.transferEnded, .finish(.notRequested, resumedFrom: 1000)])
    }

    @Test func aPrefixThatDiffersOrCannotBeCheckedIsSentFromZero() {
        let fromZero: [Action] = [.beginUpload, .upload(from: 0)]
        var differs = Self.machine()
        _ = differs.start()
        _ = differs.handle(.status(.length(400)))
        _ = differs.handle(.hashed(.digest(type: "sha256", length: 400, output: Self.prefix)))
        #expect(differs.handle(.localDigest(Self.other)) == fromZero)
        #expect(differs.resumedFrom == 0)
        // Sent from offset 0 to the end: the one-hash check follows.
        #expect(differs.handle(.uploaded) == [.transferEnded, .hash(length: nil)])

        for status: Machine.StatusAnswer in [.notFound, .notSupported, .refused, .length(0), .length(1001)] {
            var m = Self.machine()
            _ = m.start()
            #expect(m.handle(.status(status)) == fromZero, "\(status)")
        }
        for hash: Machine.HashAnswer in [
            .none, .fileEmpty, .unsupported, .refused, .digest(type: "sha256", length: 300, output: Self.prefix),
            .digest(type: "sha256", length: 400, output: nil),
        ] {
            var m = Self.machine()
            _ = m.start()
            _ = m.handle(.status(.length(400)))
            #expect(m.handle(.hashed(hash)) == fromZero, "\(hash)")
        }
        var noLocal = Self.machine()
        _ = noLocal.start()
        _ = noLocal.handle(.status(.length(400)))
        _ = noLocal.handle(.hashed(.digest(type: "md5", length: 400, output: Self.prefix)))
        #expect(noLocal.handle(.localDigest(nil)) == fromZero)

        // An answer that could not be read is not a missing hash: its error stands.
        var invalid = Self.machine()
        _ = invalid.start()
        _ = invalid.handle(.status(.length(400)))
        #expect(invalid.handle(.hashed(.invalid)) == [.fail(.requestError)])
    }

    @Test func theResumeCheckNeedsResumeAPossibleStartAndAFileWorthIt() {
        let fromZero: [Action] = [.beginUpload, .upload(from: 0)]
        var noResume = Self.machine(resume: false)
        #expect(noResume.start() == fromZero)
        var known = Self.machine(mayHoldStart: false)
        #expect(known.start() == fromZero)
        var short = Self.machine(worth: false)
        #expect(short.start() == fromZero)
        var check = Self.machine()
        #expect(check.start() == [.close, .status])
        // An empty file has no start to find: the file is closed and the upload goes from 0.
        var empty = Self.machine(total: 0)
        #expect(empty.start() == [.close, .beginUpload, .upload(from: 0)])
    }

    @Test func aDeviceWithoutStatusOrHashIsCheckedAsFarAsItCan() {
        // Neither: not verified.
        var neither = Self.uploadedFresh().0
        #expect(neither.handle(.hashed(.none)) == [.close, .status])
        #expect(neither.handle(.status(.notSupported)) == [.transferEnded, .hash(length: nil)])
        #expect(neither.handle(.hashed(.unsupported)) == [.finish(.noHashNorStatus, resumedFrom: 0)])

        // A status but no hash: the length is the verification.
        var lengthOnly = Self.uploadedFresh().0
        _ = lengthOnly.handle(.hashed(.none))
        #expect(lengthOnly.handle(.status(.length(1000))) == [.transferEnded, .hash(length: nil)])
        #expect(lengthOnly.handle(.hashed(.none)) == [.finish(.length, resumedFrom: 0)])

        // An unknown hash type: the length when it was checked, else not verified, with the type.
        var unknown = Self.uploadedFresh().0
        _ = unknown.handle(.hashed(.none))
        _ = unknown.handle(.status(.notSupported))
        #expect(unknown.handle(.hashed(.digest(type: "md5", length: 1000, output: Self.whole))) == [.finish(.unknownHashType("md5"), resumedFrom: 0)])
        var unknownWithLength = Self.uploadedFresh().0
        _ = unknownWithLength.handle(.hashed(.none))
        _ = unknownWithLength.handle(.status(.length(1000)))
        #expect(unknownWithLength.handle(.hashed(.digest(type: "md5", length: 1000, output: Self.whole))) == [.finish(.length, resumedFrom: 0)])

        // A hash this side cannot compute locally.
        var noLocal = Self.uploadedFresh().0
        _ = noLocal.handle(.hashed(.none))
        _ = noLocal.handle(.status(.notSupported))
        _ = noLocal.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.whole)))
        #expect(noLocal.handle(.localDigest(nil)) == [.finish(.noHashNorStatus, resumedFrom: 0)])
    }

    @Test func aVerifyMismatchRestartsOnceThenFails() {
        var (m, _) = Self.uploadedFresh()
        _ = m.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.other)))
        let mismatch = Machine.Failure.digestMismatch(type: "sha256", device: Self.other, local: Self.whole)
        #expect(m.handle(.localDigest(Self.whole)) == [.logRestart(mismatch), .close, .upload(from: 0)])
        #expect(m.restarted)
        // After a restart the one-hash check is not trusted: the long way.
        #expect(m.handle(.uploaded) == [.close, .status])
        #expect(m.handle(.status(.length(1000))) == [.transferEnded, .hash(length: nil)])
        _ = m.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.other)))
        #expect(m.handle(.localDigest(Self.whole)) == [.fail(mismatch)])
        #expect(m.handle(.localDigest(Self.whole)) == [])
    }

    @Test func theLongWaysOtherMismatchesRestartOnceToo() {
        // Found on the long way (after a resume): each differing copy restarts the upload once.
        func longWay(_ total: Int = 1000) -> Machine {
            var m = Self.machine(total: total)
            _ = m.start()
            _ = m.handle(.status(.length(400)))
            _ = m.handle(.hashed(.digest(type: "sha256", length: 400, output: Self.prefix)))
            _ = m.handle(.localDigest(Self.prefix))
            #expect(m.handle(.uploaded) == [.close, .status])
            #expect(m.handle(.status(.length(total))) == [.transferEnded, .hash(length: nil)])
            return m
        }
        let cases: [(Machine.HashAnswer, Machine.Failure)] = [
            (.fileEmpty, .deviceFileEmpty(localLength: 1000)),
            (.digest(type: "sha256", length: 1000, output: nil), .noOutput),
            (.digest(type: "sha256", length: 999, output: Self.whole), .hashedLengthDiffers(device: 999, local: 1000)),
            (.invalid, .requestError),
        ]
        for (answer, failure) in cases {
            var m = longWay()
            #expect(m.handle(.hashed(answer)) == [.logRestart(failure), .close, .upload(from: 0)], "\(answer)")
            #expect(m.handle(.uploaded) == [.close, .status])
            _ = m.handle(.status(.length(1000)))
            #expect(m.handle(.hashed(answer)) == [.fail(failure)], "\(answer)")
        }
        // Another device error is not a mismatch: it stands at once.
        var refused = longWay()
        #expect(refused.handle(.hashed(.refused)) == [.fail(.requestError)])
        var statusRefused = Self.uploadedFresh(verify: false).0
        #expect(statusRefused.handle(.status(.refused)) == [.fail(.requestError)])
    }

    @Test func theWholeFileHashsErrorsStandOrRestart() {
        for answer: Machine.HashAnswer in [.fileEmpty, .unsupported, .refused] {
            var m = Self.uploadedFresh().0
            #expect(m.handle(.hashed(answer)) == [.fail(.requestError)], "\(answer)")
        }
        var invalid = Self.uploadedFresh().0
        #expect(invalid.handle(.hashed(.invalid)) == [.logRestart(.requestError), .close, .upload(from: 0)])
    }

    @Test func anAppendedFirstChunkRestartsUpToFourTimesThenFails() {
        var m = Self.machine(worth: false)
        _ = m.start()
        for attempt in 1...4 {
            #expect(m.handle(.uploadViolation) == [.close, .upload(from: 0)], "attempt \(attempt)")
            #expect(m.violationRestarts == attempt)
        }
        #expect(m.handle(.uploadViolation) == [.fail(.requestError)])

        // A restart that then succeeds goes the long way (the one-hash check is only for a clean first run).
        var recovered = Self.machine(worth: false)
        _ = recovered.start()
        _ = recovered.handle(.uploadViolation)
        #expect(recovered.handle(.uploaded) == [.close, .status])
        #expect(recovered.handle(.status(.length(1000))) == [.transferEnded, .hash(length: nil)])
        _ = recovered.handle(.hashed(.digest(type: "sha256", length: 1000, output: Self.whole)))
        #expect(recovered.handle(.localDigest(Self.whole)) == [.finish(.sha256, resumedFrom: 0)])
    }

    @Test func aShortFileIsCompletedUpToThreeTimes() {
        var (m, _) = Self.uploadedFresh(verify: false)
        for completion in 1...3 {
            #expect(m.handle(.status(.length(400))) == [.hash(length: 400)], "completion \(completion)")
            _ = m.handle(.hashed(.digest(type: "sha256", length: 400, output: Self.prefix)))
            #expect(m.handle(.localDigest(Self.prefix)) == [.upload(from: 400)])
            #expect(m.completions == completion)
            #expect(m.handle(.uploaded) == [.close, .status])
        }
        #expect(m.handle(.status(.length(400))) == [.fail(.lengthDiffers(device: 400, local: 1000))])

        // A completion whose bytes differ, or an empty file, goes from 0; then the long way again.
        var differs = Self.uploadedFresh(verify: false).0
        _ = differs.handle(.status(.length(400)))
        _ = differs.handle(.hashed(.digest(type: "sha256", length: 400, output: Self.prefix)))
        #expect(differs.handle(.localDigest(Self.other)) == [.upload(from: 0)])
        #expect(differs.handle(.uploaded) == [.close, .status])
        #expect(differs.handle(.status(.length(1000))) == [.transferEnded, .finish(.notRequested, resumedFrom: 0)])
        var missing = Self.uploadedFresh(verify: false).0
        #expect(missing.handle(.status(.notFound)) == [.upload(from: 0)])
        #expect(missing.completions == 1)
    }

    @Test func aLongerFileIsSentAgainFromZeroOnce() {
        var (m, _) = Self.uploadedFresh(verify: false)
        #expect(m.handle(.status(.length(1200))) == [.upload(from: 0)])
        #expect(m.restarted)
        #expect(m.handle(.uploaded) == [.close, .status])
        #expect(m.handle(.status(.length(1200))) == [.fail(.lengthDiffers(device: 1200, local: 1000))])
    }

    @Test func anEmptyUploadToADeviceThatKeepsTheOldBytesFails() {
        var (m, actions) = Self.uploadedFresh(total: 0)
        // Nothing to hash in one go: the long way.
        #expect(actions == [.close, .status])
        #expect(m.handle(.status(.length(300))) == [.fail(.notTruncated(deviceLength: 300))])

        // An empty file on the device: FILE_EMPTY is its verification.
        for status: Machine.StatusAnswer in [.length(0), .notFound] {
            var empty = Self.uploadedFresh(total: 0).0
            #expect(empty.handle(.status(status)) == [.transferEnded, .hash(length: nil)])
            #expect(empty.handle(.hashed(.fileEmpty)) == [.finish(.empty, resumedFrom: 0)])
        }
        // A device that hashes an empty file: empty too, with nothing to digest locally.
        var hashed = Self.uploadedFresh(total: 0).0
        _ = hashed.handle(.status(.length(0)))
        #expect(hashed.handle(.hashed(.digest(type: "sha256", length: 0, output: Self.other))) == [.finish(.empty, resumedFrom: 0)])

        // After an appended first chunk the empty file is not sent again.
        var violated = Self.machine(total: 0, worth: false)
        _ = violated.start()
        #expect(violated.handle(.uploadViolation) == [.close, .close, .status])
    }

    @Test func withoutVerifyTheLengthIsTheOnlyCheck() {
        var (m, actions) = Self.uploadedFresh(verify: false)
        #expect(actions == [.close, .status])
        #expect(m.handle(.status(.length(1000))) == [.transferEnded, .finish(.notRequested, resumedFrom: 0)])
        var noStatus = Self.uploadedFresh(verify: false).0
        #expect(noStatus.handle(.status(.notSupported)) == [.transferEnded, .finish(.notRequested, resumedFrom: 0)])
    }

    @Test func aDownloadsCheckGetsTheSameVerdictsWithoutRestarts() {
        // A download's length is the device's own, so it is always checked.
        func verdict(_ answer: Machine.HashAnswer, total: Int = 1000) -> Machine.HashVerdict {
            Machine.verdict(on: answer, total: total, lengthChecked: true)
        }
        #expect(verdict(.digest(type: "sha256", length: 1000, output: Self.whole)) == .compare(type: "sha256", device: Self.whole))
        #expect(verdict(.digest(type: "sha256", length: 1000, output: nil)) == .differs(.noOutput))
        #expect(verdict(.digest(type: "crc32", length: 999, output: Self.whole)) == .differs(.hashedLengthDiffers(device: 999, local: 1000)))
        #expect(verdict(.digest(type: "md5", length: 1000, output: Self.whole)) == .verified(.length))
        #expect(verdict(.digest(type: "sha256", length: 0, output: Self.whole), total: 0) == .verified(.empty))
        #expect(verdict(.fileEmpty, total: 0) == .verified(.empty))
        #expect(verdict(.fileEmpty) == .differs(.deviceFileEmpty(localLength: 1000)))
        #expect(verdict(.none) == .verified(.length))
        #expect(verdict(.unsupported) == .verified(.length))
        #expect(verdict(.refused) == .refused)
        #expect(verdict(.invalid) == .differs(.requestError))

        #expect(Machine.verdict(type: "sha256", device: Self.whole, local: Self.whole, lengthChecked: true) == .verified(.sha256))
        #expect(Machine.verdict(type: "crc32", device: Self.whole, local: Self.whole, lengthChecked: true) == .verified(.crc32))
        #expect(Machine.verdict(type: "sha256", device: Self.whole, local: Self.other, lengthChecked: true)
            == .differs(.digestMismatch(type: "sha256", device: Self.whole, local: Self.other)))
        #expect(Machine.verdict(type: "sha256", device: Self.whole, local: nil, lengthChecked: true) == .verified(.length))
        #expect(Machine.verdict(type: "sha256", device: Self.whole, local: nil, lengthChecked: false) == .verified(.noHashNorStatus))
    }

    @Test func anEventThatDoesNotFitIsIgnored() {
        var m = Self.machine()
        _ = m.start()
        #expect(m.handle(.uploaded) == [])
        #expect(m.handle(.localDigest(Self.whole)) == [])
        // The expected one still works.
        #expect(m.handle(.status(.notFound)) == [.beginUpload, .upload(from: 0)])
        #expect(m.start() == [])
    }
}
