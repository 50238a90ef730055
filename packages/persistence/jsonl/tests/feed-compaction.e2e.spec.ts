import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, JOURNAL_FILE, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { isSealed } from '../src/change-journal-compaction.js'
import { checkJournal } from '../src/change-journal-reader.js'
import { lockPathOf } from '../src/journal-lock.js'
import { decodeLayout, HEADER_BYTES, MAX_BASE_FRAME } from '../src/journal-records.js'
import { tempDir } from './helpers.js'

/**
 * The change journal compacted by writer processes while others append and
 * a follower tails the feed: every session changed after the follower's
 * cursor is reported to it, as a change or through a resync — also when the
 * compacting process is killed between its seal and its rename, or its rename
 * fails (`strace` fault injection; the tests fail, never skip, without it).
 */
const here = dirname(fileURLToPath(import.meta.url))
const appender = join(here, 'workers', 'journal-appender.mjs')
const LIMIT = 16 * 1024

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-persistence-jsonl...')
  execFileSync('strace', ['-V'])
})

const cleanups: Array<() => void> = []
const open: JsonlPersistence[] = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

interface Appender {
  readonly lines: string[]
  /** The ledger: the next offset of every session after its last acknowledged change (0: deleted). */
  readonly ledger: Map<string, number>
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/**
 * Holds every seal 30 ms longer (`strace` delays the return of each
 * `fchmod`: the seal, and the new journal's mode), so other processes write
 * to sealed journals often: a writer that did not write such a record again
 * to the compacted journal would lose changes this test sees.
 */
const SLOW_SEAL = ['-e', 'trace=fchmod', '-e', 'inject=fchmod:delay_exit=30000']
/** `strace` injecting `fault` into every rename (the compaction's is an appender's only one). */
const renameFault = (fault: string): string[] => [
  '-e',
  'trace=rename,renameat,renameat2',
  '-e',
  `inject=rename,renameat,renameat2:${fault}`,
]

/** Starts an appender process compacting past `limit`, under `strace` with `traced` options. */
function startAppender(root: string, tag: string, steps: number, limit: number, traced: readonly string[]): Appender {
  const args = [appender, root, tag, String(steps), String(limit)]
  const child: ChildProcess = spawn('strace', ['-f', '-qq', '-o', '/dev/null', ...traced, process.execPath, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines: string[] = []
  const ledger = new Map<string, number>()
  let buffered = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk
    for (let at = buffered.indexOf('\n'); at !== -1; at = buffered.indexOf('\n')) {
      const line = buffered.slice(0, at)
      buffered = buffered.slice(at + 1)
      lines.push(line)
      const [word, id, next] = line.split(' ')
      if (word === 'ack') ledger.set(id!, Number(next))
    }
  })
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => lines.push(`stderr ${chunk}`))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  )
  return { lines, ledger, exited }
}

/** A follower of the feed: the revision it believes each session has, and its rescans by reason. */
class Follower {
  cursor = ''
  readonly seen = new Map<string, string>()
  readonly rescans: string[] = []
  constructor(readonly reader: JsonlPersistence) {}

  async poll(): Promise<void> {
    const result = await this.reader.changes(this.cursor === '' ? undefined : this.cursor)
    this.cursor = result.cursor
    const ids = new Set<string>(result.ids)
    if (result.rescan) {
      this.rescans.push(result.rescanReason ?? 'unknown')
      for (const id of this.seen.keys()) ids.add(id)
      for (const record of await this.reader.list()) ids.add(record.header.id)
    }
    for (const id of ids) {
      const revision = await this.reader.stat(SessionId(id))
      if (revision === undefined) this.seen.delete(id)
      else this.seen.set(id, revision)
    }
  }
}

async function tail(follower: Follower, until: Promise<unknown>): Promise<number> {
  let running = true
  void until.finally(() => {
    running = false
  })
  let polls = 0
  while (running) {
    await follower.poll()
    polls++
    await sleep(1)
  }
  return polls
}

/** The follower's view equals the stored state, and the stored state what the ledgers of `finished` appenders acknowledged. */
async function expectExact(reader: JsonlPersistence, follower: Follower, finished: readonly Appender[]): Promise<void> {
  const stored = new Map<string, string>()
  for (const record of await reader.list()) stored.set(record.header.id, record.revision)
  expect(follower.seen).toEqual(stored)
  for (const appender of finished)
    for (const [id, next] of appender.ledger) {
      const events = stored.has(id) ? (await reader.inspect(SessionId(id))).events.length : 0
      expect(events, id).toBe(next)
    }
}

function journalBytes(root: string): { size: number; verbatim: number; sealed: boolean } {
  const path = join(root, JOURNAL_FILE)
  const stats = statSync(path)
  const layout = decodeLayout(readFileSync(path).subarray(0, HEADER_BYTES + MAX_BASE_FRAME))!
  return { size: stats.size, verbatim: stats.size - layout.start, sealed: isSealed(stats.mode) }
}

describe('compaction across processes', () => {
  it('3 processes append and compact (16 KiB limit) while a follower tails: no change is lost, every rescan is a typed resync; a follower left behind gets one resync, then exact', async () => {
    const { dir: root, cleanup } = tempDir('dsh-compaction-3p-')
    cleanups.push(cleanup)
    await createJsonlPersistence({ root }).close()
    const reader = createJsonlPersistence({ root, readOnly: true })
    open.push(reader)
    const follower = new Follower(reader)
    await follower.poll()
    // A second follower takes its cursor now and polls only once the writers are done: far behind the horizon.
    const lateReader = createJsonlPersistence({ root, readOnly: true })
    open.push(lateReader)
    const late = new Follower(lateReader)
    await late.poll()
    const appenders = [0, 1, 2].map((w) => startAppender(root, `w${w}`, 400, LIMIT, SLOW_SEAL))
    const exits = Promise.all(appenders.map((a) => a.exited))
    const polls = await tail(follower, exits)
    for (const [w, exit] of (await exits).entries()) {
      expect([exit, appenders[w]!.lines.filter((l) => !l.startsWith('ack'))]).toEqual([
        { code: 0, signal: null },
        ['ready', expect.stringMatching(/^compactions \d+$/), 'done'],
      ])
    }
    await follower.poll()
    await expectExact(reader, follower, appenders)
    const compactions = appenders.map((a) => Number(a.lines.at(-2)!.split(' ')[1]))
    // Compactions happened while the other processes appended.
    expect(compactions.reduce((a, b) => a + b)).toBeGreaterThanOrEqual(10)
    expect(compactions.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2)
    // Every rescan after the first was the typed resync of a follower behind the horizon, counted once each.
    expect(follower.rescans[0]).toBe('no-cursor')
    expect(new Set(follower.rescans.slice(1))).toEqual(new Set(follower.rescans.length > 1 ? ['behind-horizon'] : []))
    expect(reader.metrics.horizonRescans).toBe(follower.rescans.length - 1)
    expect(reader.metrics.rescans).toBe(follower.rescans.length)
    // The late follower: one typed resync, one rescan, then exact.
    await late.poll()
    expect(late.rescans).toEqual(['no-cursor', 'behind-horizon'])
    expect(lateReader.metrics).toMatchObject({ rescans: 2, horizonRescans: 1 })
    await expectExact(lateReader, late, appenders)
    await late.poll()
    expect(late.rescans).toHaveLength(2)
    const bytes = journalBytes(root)
    expect(bytes.sealed).toBe(false)
    // The verbatim records stay near the limit (one step's writes of each process past it at most).
    expect(bytes.verbatim).toBeLessThanOrEqual(LIMIT + 3 * 4096)
    expect(await checkJournal(root)).toMatchObject({ ok: true })
    console.log(
      `3 processes: compactions ${compactions.join('/')}, ${polls} polls, rescans ${follower.rescans.join(',')}, journal ${bytes.size} bytes (${bytes.verbatim} verbatim)`,
    )
  }, 600_000)

  for (const [fault, what] of [
    ['signal=SIGKILL:when=1', 'killed at its rename (after sealing)'],
    ['error=EIO', 'whose every rename fails (its compactions unseal again)'],
  ] as const) {
    it(`a compacting process ${what}: the others go on, the follower misses nothing`, async () => {
      const { dir: root, cleanup } = tempDir('dsh-compaction-fault-')
      cleanups.push(cleanup)
      await createJsonlPersistence({ root }).close()
      const reader = createJsonlPersistence({ root, readOnly: true })
      open.push(reader)
      const follower = new Follower(reader)
      await follower.poll()
      // The faulty one compacts past half the limit the others use: it is the first to compact.
      const faulty = startAppender(root, 'faulty', 300, LIMIT / 2, renameFault(fault))
      const others = [1, 2].map((w) => startAppender(root, `w${w}`, 300, LIMIT, SLOW_SEAL))
      const appenders = [faulty, ...others]
      const exits = Promise.all(appenders.map((a) => a.exited))
      await tail(follower, exits)
      const [faultyExit, ...otherExits] = await exits
      for (const [w, exit] of otherExits.entries()) expect([exit, others[w]!.lines.at(-1)]).toEqual([{ code: 0, signal: null }, 'done'])
      const killed = fault.startsWith('signal')
      // strace ends the way its tracee did.
      if (killed) expect(faultyExit).toEqual({ code: null, signal: 'SIGKILL' })
      else expect([faultyExit, faulty.lines.at(-2), faulty.lines.at(-1)]).toEqual([{ code: 0, signal: null }, 'compactions 0', 'done'])
      await follower.poll()
      // A killed writer may have made a change durable that it did not acknowledge: its ledger is not exact.
      await expectExact(reader, follower, killed ? others : appenders)
      const bytes = journalBytes(root)
      expect(bytes.sealed).toBe(false)
      expect(existsSync(lockPathOf(join(root, JOURNAL_FILE)))).toBe(false)
      // The killed compactor's new journal, never renamed, was removed by the compaction that completed its work.
      expect(readdirSync(root).filter((name) => name.startsWith('.'))).toEqual([])
      expect(await checkJournal(root)).toMatchObject({ ok: true })
      const compactions = others.map((a) => Number(a.lines.at(-2)!.split(' ')[1]))
      expect(compactions.reduce((a, b) => a + b)).toBeGreaterThan(0)
      console.log(
        `${what}: exit ${JSON.stringify(faultyExit)}, others compacted ${compactions.join('/')}, rescans ${follower.rescans.join(',')}`,
      )
    }, 600_000)
  }
})
