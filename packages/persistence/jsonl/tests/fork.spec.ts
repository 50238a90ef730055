import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { dirname, join } from 'node:path'
import { Context } from '@dsh/context'
import { SessionId, SessionLogOffset, type StoredSessionEvent, sessionStorePlugin } from '@dsh/session'
import { type AppendTarget, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlCompression, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { checkpointDistance } from '../src/log-padding.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function root(): string {
  const { dir, cleanup } = tempDir('dsh-jsonl-fork-')
  cleanups.push(cleanup)
  return dir
}

function backend(dir: string, compression: JsonlCompression = 'zstd'): JsonlPersistence {
  const p = createJsonlPersistence({ root: dir, compression })
  open.push(p)
  return p
}

const plain = (events: readonly StoredSessionEvent[]): unknown => JSON.parse(JSON.stringify(events))

function forkTarget(id: string, cut: number, source: string): AppendTarget {
  return { ...targetOf(id, cut, { isSeeded: true, parentSession: source as SessionId }), forkSource: SessionId(source) }
}

/** A source with `batches` batches of `size` events, and a fork of it at `cut` with `own` events of its own. */
async function sourceAndFork(p: JsonlPersistence, cut: number, { batches = 4, size = 5, own = 3 } = {}) {
  for (let b = 0; b < batches; b++) await p.append(targetOf('src'), eventsFrom(b * size, size))
  const seed = (await p.inspect(SessionId('src'))).events.slice(0, cut)
  await p.append(forkTarget('kid', cut, 'src'), [...seed, ...eventsFrom(cut, own, 9)])
  return { seed, expected: [...seed, ...eventsFrom(cut, own, 9)] }
}

for (const compression of ['zstd', 'none'] as const) {
  describe(`forks by reference (${compression})`, () => {
    it('a fork log holds its header (with the reference) and its own events only, and reads whole', async () => {
      const dir = root()
      const p = backend(dir, compression)
      // A cut in the middle of the third batch.
      const { expected } = await sourceAndFork(p, 12)
      const kidLog = readFileSync(p.logPath('kid'))
      const srcLog = readFileSync(p.logPath('src'))
      expect(kidLog.length).toBeLessThan(srcLog.length)
      const text = compression === 'zstd' ? execFileSync('zstd', ['-dc', p.logPath('kid')]).toString('utf8') : kidLog.toString('utf8')
      const lines = text.split('\n').filter((l) => l.startsWith('{"format"') || l.startsWith('{"type"'))
      const header = JSON.parse(lines[0]!) as {
        formatVersion: number
        fork: { source: string; cut: number; logId: string; end: number; batchCrc: number }
      }
      expect(header.formatVersion).toBe(4)
      expect(header.fork).toMatchObject({ source: 'src', cut: 12 })
      expect(header.fork.end).toBeLessThan(srcLog.length)
      expect(lines.slice(1).map((l) => (JSON.parse(l) as { seq: number }).seq)).toEqual([12, 13, 14])
      const observation = await p.inspect(SessionId('kid'))
      expect(plain(observation.events)).toEqual(plain(expected))
      expect(observation.inheritedEventCount).toBe(12)
      // The source keeps going; the fork does not change.
      await p.append(targetOf('src'), eventsFrom(20, 2))
      const reopened = backend(dir, compression)
      expect(plain((await reopened.inspect(SessionId('kid'))).events)).toEqual(plain(expected))
      expect(await reopened.verify(SessionId('kid'))).toMatchObject({ events: 15, tornBytes: 0, forkSource: 'src' })
      // Appends to a fork continue at its own offset, also from a fresh instance.
      const writer = backend(dir, compression)
      await p.close()
      await reopened.close()
      await writer.append(forkTarget('kid', 12, 'src'), eventsFrom(15, 2, 9))
      expect((await writer.inspect(SessionId('kid'))).events.map((e) => e.seq)).toEqual(Array.from({ length: 17 }, (_, i) => i))
    })

    it('inspectFrom the cut reads only the fork own log (and the source header and one trailer)', async () => {
      const dir = root()
      const p = backend(dir, compression)
      await sourceAndFork(p, 20, { batches: 40, size: 5, own: 4 })
      const reader = backend(dir, compression)
      const suffix = await reader.inspectFrom(SessionId('kid'), SessionLogOffset(20))
      expect(suffix.events.map((e) => e.seq)).toEqual([20, 21, 22, 23])
      const kidBytes = statSync(p.logPath('kid')).size
      const srcBytes = statSync(p.logPath('src')).size
      // The child's log, the source's header prefix (512 B), its slots and the walk from them (at most a sixteenth of
      // its log: checkpointDistance), and a trailer; not the source's 200 events.
      expect(reader.metrics.bytesRead).toBeLessThanOrEqual(kidBytes * 2 + 1024 + 124 + Math.max(1024, 2 * checkpointDistance(srcBytes)))
      expect(reader.metrics.bytesRead).toBeLessThan(kidBytes + srcBytes / 2)
      expect(reader.metrics.bodyReads).toBe(0)
    })

    it('a fresh backend forks an appended-to (padded) source from its header and tail alone, one read of each', async () => {
      const dir = root()
      const p = backend(dir, compression)
      for (let b = 0; b < 6; b++) await p.append(targetOf('src'), eventsFrom(b * 5, 5))
      const seed = (await p.inspect(SessionId('src'))).events.slice(0, 12)
      await p.close()
      const srcBytes = statSync(p.logPath('src')).size
      if (compression === 'zstd') expect(srcBytes % 4096).toBe(0) // padded: the tail is found through its end slots
      const forker = backend(dir, compression)
      await forker.append(forkTarget('kid', 12, 'src'), [...seed, ...eventsFrom(12, 2, 9)])
      // The cut located from the source's header and its last trailers (a second header read checks, just before the
      // link, that the source was not re-created) — never a fallback that reads the header again or the body.
      expect(forker.metrics.headerReads).toBe(2)
      expect(forker.metrics.bodyReads).toBe(0)
      expect(forker.metrics.bytesRead).toBeLessThan(Math.min(2048, srcBytes))
      expect((await forker.inspect(SessionId('kid'))).events.map((e) => e.seq)).toEqual(Array.from({ length: 14 }, (_, i) => i))
    })

    it('a fork of a fork resolves the chain, also with a cut inside the parent own inherited prefix', async () => {
      const p = backend(root(), compression)
      const { expected } = await sourceAndFork(p, 7)
      const mid = (await p.inspect(SessionId('kid'))).events
      await p.append(forkTarget('grandkid', 9, 'kid'), [...mid.slice(0, 9), ...eventsFrom(9, 2, 5)])
      await p.append(forkTarget('early', 4, 'kid'), [...mid.slice(0, 4), ...eventsFrom(4, 1, 6)])
      expect(plain((await p.inspect(SessionId('grandkid'))).events)).toEqual(plain([...expected.slice(0, 9), ...eventsFrom(9, 2, 5)]))
      expect(plain((await p.inspect(SessionId('early'))).events)).toEqual(plain([...expected.slice(0, 4), ...eventsFrom(4, 1, 6)]))
      // 'early' inherits only events the source itself holds: its reference names 'src', not 'kid'.
      const early = JSON.parse(
        (compression === 'zstd' ? execFileSync('zstd', ['-dc', p.logPath('early')]) : readFileSync(p.logPath('early')))
          .toString('utf8')
          .split('\n')[0]!,
      ) as { fork: { source: string } }
      expect(early.fork.source).toBe('src')
    })

    it('deleting a referenced source is refused; with materializeDependants the forks (and theirs) keep every event', async () => {
      const dir = root()
      const p = backend(dir, compression)
      const { expected } = await sourceAndFork(p, 12)
      const mid = (await p.inspect(SessionId('kid'))).events
      await p.append(forkTarget('grandkid', 14, 'kid'), [...mid.slice(0, 14), ...eventsFrom(14, 1, 5)])
      const before = readFileSync(p.logPath('src'))
      await expect(p.delete(SessionId('src'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
      await expect(p.delete(SessionId('kid'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
      expect(readFileSync(p.logPath('src')).equals(before)).toBe(true)
      // A refused delete leaves the source fully usable, also for new forks.
      await p.append(targetOf('src'), eventsFrom(20, 1))
      expect(await p.delete(SessionId('src'), { materializeDependants: true })).toBe(true)
      expect(await p.stat(SessionId('src'))).toBeUndefined()
      const fresh = backend(dir, compression)
      expect(plain((await fresh.inspect(SessionId('kid'))).events)).toEqual(plain(expected))
      expect(plain((await fresh.inspect(SessionId('grandkid'))).events)).toEqual(plain([...expected.slice(0, 14), ...eventsFrom(14, 1, 5)]))
      // Nothing references 'kid' any more: it deletes, and the grandchild still reads.
      expect(await p.delete(SessionId('kid'))).toBe(true)
      expect((await fresh.inspect(SessionId('grandkid'))).events).toHaveLength(15)
    })

    it('a deleted fork does not pin its source', async () => {
      const p = backend(root(), compression)
      await sourceAndFork(p, 5)
      expect(await p.delete(SessionId('kid'))).toBe(true)
      expect(await p.delete(SessionId('src'))).toBe(true)
    })

    it('a source deleted and re-created under the same id makes the fork read fail CORRUPT, never return other events', async () => {
      const dir = root()
      const p = backend(dir, compression)
      await sourceAndFork(p, 8)
      const kidLog = readFileSync(p.logPath('kid'))
      // Delete the fork, delete and re-create the source with different events, then put the fork's log back.
      expect(await p.delete(SessionId('kid'))).toBe(true)
      expect(await p.delete(SessionId('src'))).toBe(true)
      for (let b = 0; b < 4; b++) await p.append(targetOf('src'), eventsFrom(b * 5, 5, 7))
      const { mkdirSync } = await import('node:fs')
      mkdirSync(p.logPath('kid').slice(0, -p.logPath('kid').split('/').at(-1)!.length - 1), { recursive: true })
      writeFileSync(p.logPath('kid'), kidLog)
      const reader = backend(dir, compression)
      await expect(reader.inspect(SessionId('kid'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      await expect(reader.inspectFrom(SessionId('kid'), SessionLogOffset(8))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      await expect(reader.verify(SessionId('kid'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      // The listing (header only) still shows it; the source is unharmed.
      expect((await reader.list()).map((r) => r.header.id)).toEqual(['kid', 'src'])
      expect((await reader.inspect(SessionId('src'))).events).toHaveLength(20)
    })

    it('one byte flipped anywhere in the source prefix makes the fork read fail CORRUPT; after the cut it does not matter', async () => {
      const dir = root()
      const p = backend(dir, compression)
      await sourceAndFork(p, 10)
      const srcFile = p.logPath('src')
      const original = readFileSync(srcFile)
      const header = JSON.parse(
        (compression === 'zstd' ? execFileSync('zstd', ['-dc', p.logPath('kid')]) : readFileSync(p.logPath('kid')))
          .toString('utf8')
          .split('\n')[0]!,
      ) as { fork: { end: number } }
      await p.close()
      const end = header.fork.end
      for (const at of [0, 3, Math.floor(end / 3), Math.floor(end / 2), end - 60, end - 1]) {
        const damaged = Buffer.from(original)
        damaged[at] = damaged[at]! ^ 0x20
        writeFileSync(srcFile, damaged)
        const reader = createJsonlPersistence({ root: dir, compression, readOnly: true })
        await expect(reader.inspect(SessionId('kid')), `byte ${at}`).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
        await reader.close()
      }
      const damaged = Buffer.from(original)
      damaged[end + 5] = damaged[end + 5]! ^ 0x20
      writeFileSync(srcFile, damaged)
      const reader = createJsonlPersistence({ root: dir, compression, readOnly: true })
      expect((await reader.inspect(SessionId('kid'))).events).toHaveLength(13)
      await expect(reader.inspect(SessionId('src'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      await reader.close()
      writeFileSync(srcFile, original)
    })

    it('a fork does not reference a source being deleted; a marker left by a crashed delete is stale', async () => {
      const p = backend(root(), compression)
      await p.append(targetOf('src'), eventsFrom(0, 3))
      const seed = (await p.inspect(SessionId('src'))).events
      const marker = join(dirname(p.logPath('src')), 'deleting')
      // A delete in progress (this process is alive): refused, nothing stored.
      writeFileSync(marker, JSON.stringify({ host: hostname(), pid: process.pid }))
      await expect(p.append(forkTarget('kid', 3, 'src'), [...seed])).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CONFLICT' })
      expect(await p.stat(SessionId('kid'))).toBeUndefined()
      // A crashed deleter (no such process): the fork goes ahead by reference.
      writeFileSync(marker, JSON.stringify({ host: hostname(), pid: 2 ** 22 + 7 }))
      await p.append(forkTarget('kid', 3, 'src'), [...seed, ...eventsFrom(3, 1, 4)])
      expect((await p.inspect(SessionId('kid'))).events).toHaveLength(4)
      await expect(p.delete(SessionId('src'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
    })

    it('refuses a fork whose source does not hold the cut, and stores nothing', async () => {
      const p = backend(root(), compression)
      await p.append(targetOf('src'), eventsFrom(0, 3))
      const seed = [...(await p.inspect(SessionId('src'))).events, ...eventsFrom(3, 2)]
      await expect(p.append(forkTarget('kid', 5, 'src'), seed)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CONFLICT' })
      await expect(p.append(forkTarget('kid', 5, 'absent'), seed)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CONFLICT' })
      expect(await p.stat(SessionId('kid'))).toBeUndefined()
    })
  })
}

describe('forks through the store and the coordinator', () => {
  it('Session.fork persists the child as a reference after flushing the source up to the cut', async () => {
    const dir = root()
    const ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    const persistence = createJsonlPersistence({ root: dir })
    await ctx.activate(sessionPersistencePlugin(persistence))
    const sessions = ctx.require('sessions')
    const parent = sessions.create({ id: 'parent' })
    parent.append('turn/start', { turn: 1 })
    parent.append('user/message', { text: randomBytes(15_000).toString('base64') })
    parent.append('turn/end', { turn: 1, reason: 'completed' })
    // No flush of the parent: the child's first append must make the parent durable first.
    const child = sessions.fork(parent, { childId: 'child', origin: 'subagent' })
    child.append('turn/start', { turn: 2 })
    child.append('turn/end', { turn: 2, reason: 'completed' })
    await sessions.flush(child)
    expect(statSync(persistence.logPath('child')).size).toBeLessThan(1024)
    expect(statSync(persistence.logPath('parent')).size).toBeGreaterThan(15_000)
    expect(execFileSync('zstd', ['-dc', persistence.logPath('child')]).toString('utf8')).toContain('"fork":{"source":"parent"')
    expect(plain((await persistence.inspect(SessionId('child'))).events)).toEqual(plain(child.events))
    expect(child.isOwnSeq(3)).toBe(true)
    expect(child.isOwnSeq(2)).toBe(false)
    await ctx.dispose()
    const reader = createJsonlPersistence({ root: dir, readOnly: true })
    const loaded = await reader.inspect(SessionId('child'))
    expect(loaded.inheritedEventCount).toBe(3)
    expect(loaded.events).toHaveLength(5)
    await reader.close()
  })
})

describe('the fork chain bound', () => {
  it('a fork whose reads would follow more than 64 references stores its prefix: every level of a 70-deep chain reads whole', async () => {
    const dir = root()
    const p = backend(dir, 'none')
    const picture = Buffer.from('not really a png, but bytes all the same')
    const ref = await p.putAttachment(SessionId('l0'), picture, { mediaType: 'image/png' })
    // Level 0 holds event 0; level k forks level k - 1 after event k - 1 and adds event k.
    const events = Array.from({ length: 70 }, (_, seq) => eventsFrom(seq, 1)[0]!)
    await p.append(targetOf('l0'), events.slice(0, 1))
    for (let level = 1; level < 70; level++) await p.append(forkTarget(`l${level}`, level, `l${level - 1}`), events.slice(0, level + 1))
    const header = (id: string): { fork?: { source: string } } => JSON.parse(readFileSync(p.logPath(id)).toString('utf8').split('\n')[0]!)
    // Level 64's reads follow 64 references; level 65 holds its prefix, and level 66 references it again.
    expect(header('l64').fork?.source).toBe('l63')
    expect(header('l65').fork).toBeUndefined()
    expect(header('l66').fork?.source).toBe('l65')
    expect(readFileSync(p.logPath('l65')).length).toBeGreaterThan(readFileSync(p.logPath('l66')).length * 10)
    const reader = backend(dir, 'none')
    for (const level of [63, 64, 65, 66, 69])
      expect(plain((await reader.inspect(SessionId(`l${level}`))).events)).toEqual(plain(events.slice(0, level + 1)))
    // The level that stores its prefix has its own link to what it inherits.
    expect(Buffer.from(await reader.readAttachment(SessionId('l69'), ref.digest)).equals(picture)).toBe(true)
    // Event 0 is held by level 65 now: a fork inside the oldest prefix references it there.
    await reader.append(forkTarget('early', 1, 'l69'), events.slice(0, 1).concat(eventsFrom(1, 1, 7)))
    expect(header('early').fork?.source).toBe('l65')
    expect(plain((await reader.inspect(SessionId('early'))).events)).toEqual(plain([...events.slice(0, 1), ...eventsFrom(1, 1, 7)]))
  })
})
