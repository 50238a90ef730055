import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { listV0Logs, readV0Log, type V0Event, type V0Header, writeV0Log } from '@dsh/session-import-v0'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it, onTestFinished } from 'vitest'
import { runCli } from '../src/index.js'
import { cli } from './support/run.js'

// `dsh import --from dsh-v0` and `dsh export --to dsh-v0` end to end through the CLI: a harness root
// with a parent, a fresh and a forked subagent (streamed text packed into rows, as the harness writes it) and a
// damaged log; then `dsh agents`, `dsh show`, a round trip and a second run.

/** A fresh directory named after `name`, removed when the current test finishes. */
function scratchDir(name: string): string {
  const { dir, cleanup } = tempDir(`dsh-cli-${name}-`)
  onTestFinished(cleanup)
  return dir
}

const T0 = 1_760_000_000_000
const PARENT = 'release-plan'

/** Harness-shaped events, one batch (frame) per turn. */
class Turns {
  readonly batches: V0Event[][] = []
  private seq = 0
  private clock: number

  constructor(start = T0, seed: readonly V0Event[][] = []) {
    this.clock = start
    for (const batch of seed) {
      this.batches.push(batch)
      this.seq += batch.length
      this.clock = batch.at(-1)!.time
    }
  }

  get events(): V0Event[] {
    return this.batches.flat()
  }

  turn(turn: number, prompt: string, answer: string, descriptor?: unknown): this {
    const events: V0Event[] = []
    const add = (type: string, data: unknown, extras: Partial<V0Event> = {}): number => {
      this.clock += 7
      events.push({ type, seq: this.seq, time: this.clock, data, ...extras })
      return this.seq++
    }
    add('turn/start', { turn })
    if (descriptor !== undefined) add('subagent/descriptor', descriptor)
    add(
      'user/message',
      { id: `u${turn}`, role: 'user', content: [{ type: 'text', text: prompt }], source: { kind: 'user' } },
      { surfaceOp: 'append' },
    )
    add('step/start', { turn, step: 0 })
    const chunks = [add('assistant/chunk', { turn, step: 0, chunk: { type: 'block-start', index: 0, blockType: 'text' } })]
    for (const piece of answer.match(/.{1,5}/gs) ?? [])
      chunks.push(add('assistant/chunk', { turn, step: 0, chunk: { type: 'text-delta', index: 0, text: piece } }))
    chunks.push(add('assistant/chunk', { turn, step: 0, chunk: { type: 'finish', reason: { kind: 'stop' } } }))
    add(
      'assistant/message',
      {
        turn,
        step: 0,
        message: {
          id: `a${turn}`,
          role: 'assistant',
          content: [{ type: 'text', text: answer }],
          source: { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' },
        },
      },
      { sourceEventSeqs: chunks, surfaceOp: 'append' },
    )
    add('step/end', { turn, step: 0 })
    add('turn/end', { turn, reason: { kind: 'completed' } })
    this.batches.push(events)
    return this
  }
}

async function harnessRoot(): Promise<{ from: string; parent: Turns; forked: Turns; parentLog: string }> {
  const from = scratchDir('v0')
  const parent = new Turns().turn(1, 'Plan the release.', 'Three steps: freeze, test, tag.').turn(2, 'Go on.', 'Frozen and tested.')
  const child = (id: string, extra: Partial<V0Header> = {}): V0Header => ({
    id,
    createdAt: T0 + 1000,
    cwd: '/work',
    parentSession: PARENT,
    origin: 'subagent',
    delegationDepth: 1,
    ...extra,
  })
  const fresh = new Turns(T0 + 1000).turn(1, 'Find the changelog.', 'It is in docs/.', {
    version: 2,
    mode: 'continuable',
    provider: 'inprocess',
    label: 'researcher',
  })
  const forked = new Turns(T0, parent.batches).turn(3, 'Summarize.', 'Release planned and half done.', {
    version: 2,
    mode: 'one-shot',
    provider: 'fork',
    label: 'summarize',
  })
  const parentLog = await writeV0Log(from, { id: PARENT, createdAt: T0, cwd: '/work', delegationDepth: 0 }, parent.batches)
  await writeV0Log(from, child('researcher-1'), fresh.batches)
  await writeV0Log(from, child('summarize-1', { seedLength: parent.events.length }), forked.batches)
  // A byte flipped in the last frame of another session: its checksum fails.
  const damaged = await writeV0Log(
    from,
    { id: 'damaged', createdAt: T0 + 2000, delegationDepth: 0 },
    new Turns(T0 + 2000).turn(1, 'Hi.', 'Hello there.').batches,
  )
  const bytes = readFileSync(damaged)
  bytes[bytes.length - 10] = bytes[bytes.length - 10]! ^ 0x40
  writeFileSync(damaged, bytes)
  return { from, parent, forked, parentLog }
}

describe('dsh import --from dsh-v0 / dsh export --to dsh-v0', () => {
  it('imports a harness root: the subagent tree, every event, a typed failure (exit 1), a round trip and a second run that writes nothing', async () => {
    const { from, parent, forked, parentLog } = await harnessRoot()
    // The harness packs streamed text into rows (what the import appends as event runs).
    expect(execFileSync('zstd', ['-dc', parentLog]).toString()).toContain('{"type":"text-chunks"')
    const root = join(scratchDir('dsh'), 'root')

    const first = await cli(['import', from, '--from', 'dsh-v0', '--root', root, '--json'])
    expect(first.code, first.stderr).toBe(1)
    const report = JSON.parse(first.stdout)
    expect(report).toMatchObject({ imported: 3, updated: 0, unchanged: 0, failed: 1 })
    const byId = new Map(report.sessions.map((s: { id: string }) => [s.id, s]))
    expect(byId.get('damaged')).toMatchObject({ status: 'failed', reason: { code: expect.stringMatching(/^IMPORT_V0_/) } })
    expect(byId.get(PARENT)).toMatchObject({ status: 'imported', events: parent.events.length, appended: parent.events.length })
    expect(byId.get('summarize-1')).toMatchObject({ status: 'imported', events: forked.events.length, forkSource: PARENT })

    const agents = await cli(['agents', PARENT, '--root', root, '--json'])
    expect(agents.code, agents.stderr).toBe(0)
    const rows = (JSON.parse(agents.stdout).rows as { id: string; mode?: string; label?: string }[]).sort((a, b) => (a.id < b.id ? -1 : 1))
    expect(rows).toEqual([
      expect.objectContaining({ id: 'researcher-1', mode: 'continuable', label: 'researcher' }),
      expect.objectContaining({ id: 'summarize-1', mode: 'one-shot', label: 'summarize' }),
    ])

    // Every event, the inherited prefix included; the streamed text arrives as its deltas.
    const show = await cli(['show', 'summarize-1', '--root', root, '--json', '--limit', '1000'])
    expect(show.code, show.stderr).toBe(0)
    const shown = JSON.parse(show.stdout).events as { type: string; data: { delta?: string } }[]
    expect(shown).toHaveLength(forked.events.length)
    expect(
      shown
        .filter((e) => e.type === 'assistant/chunk' && e.data.delta !== undefined)
        .map((e) => e.data.delta)
        .join(''),
    ).toBe('Three steps: freeze, test, tag.Frozen and tested.Release planned and half done.')

    // Export, then read both logs as the harness would: event for event equal (the parent's text came as packed rows).
    const out = scratchDir('out')
    const exported = await cli(['export', PARENT, 'summarize-1', '--to', 'dsh-v0', out, '--root', root, '--json'])
    expect(exported.code, exported.stderr).toBe(0)
    for (const id of [PARENT, 'summarize-1']) {
      const read = async (dir: string) => {
        const entry = (await listV0Logs(dir)).find((e) => e.dirId === id)!
        return readV0Log(dir, entry)
      }
      const [a, b] = [await read(from), await read(out)]
      expect(b.header).toEqual(a.header)
      expect(b.events).toEqual(a.events)
    }

    const second = await cli(['import', from, '--from', 'dsh-v0', '--root', root, '--json'])
    expect(second.code).toBe(1)
    expect(JSON.parse(second.stdout)).toMatchObject({ imported: 0, updated: 0, unchanged: 3, failed: 1, appends: 0 })
  })
})

describe('dsh import: guards', () => {
  it('refuses a dsh root that reaches into the v0 root through a symlink (CLI_USAGE) and writes nothing there', async () => {
    const { from } = await harnessRoot()
    const before = readdirSync(from, { recursive: true, encoding: 'utf8' }).sort()
    const link = join(scratchDir('link'), 'v0-link')
    symlinkSync(from, link)
    const run = await cli(['import', from, '--from', 'dsh-v0', '--root', join(link, 'dshroot'), '--json'])
    expect(run.code).toBe(2)
    const { error } = JSON.parse(run.stdout)
    expect(error.code).toBe('CLI_USAGE')
    expect(error.message).toMatch(/overlap \(through symlinks: /)
    // The other way round: the v0 root named through a link inside the dsh root's real directory.
    const viaLink = await cli(['import', link, '--from', 'dsh-v0', '--root', join(from, 'nested', 'root'), '--json'])
    expect(JSON.parse(viaLink.stdout).error.code).toBe('CLI_USAGE')
    expect(readdirSync(from, { recursive: true, encoding: 'utf8' }).sort()).toEqual(before)
  })

  it('export refuses a target that is the dsh root, inside it or around it, also through a symlink (CLI_USAGE), and writes nothing', async () => {
    const { from } = await harnessRoot()
    const root = join(scratchDir('export-root'), 'root')
    expect((await cli(['import', from, '--from', 'dsh-v0', '--root', root, '--json'])).code).toBe(1)
    const listing = (dir: string) => readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()
    const before = listing(root)
    const link = join(scratchDir('export-link'), 'root-link')
    symlinkSync(root, link)
    const around = join(scratchDir('export-around'))
    const aroundRoot = join(around, 'root')
    expect((await cli(['import', from, '--from', 'dsh-v0', '--root', aroundRoot, '--json'])).code).toBe(1)
    const aroundBefore = listing(around)
    for (const [target, dshRoot, via] of [
      [root, root, false],
      [join(root, 'v0-out'), root, false],
      [join(link, 'v0-out'), root, true],
      [around, aroundRoot, false],
    ] as const) {
      const run = await cli(['export', PARENT, '--to', 'dsh-v0', target, '--root', dshRoot, '--json'])
      expect(run.code, target).toBe(2)
      const { error } = JSON.parse(run.stdout)
      expect(error.code, target).toBe('CLI_USAGE')
      expect(error.message, target).toMatch(via ? /overlap \(through symlinks: / : /^The export directory .* and the dsh root .* overlap; /)
    }
    expect(listing(root)).toEqual(before)
    expect(listing(around)).toEqual(aroundBefore)
    // A directory beside the root is fine.
    const beside = await cli(['export', PARENT, '--to', 'dsh-v0', join(root, '..', 'v0-out'), '--root', root, '--json'])
    expect(beside.code, beside.stdout + beside.stderr).toBe(0)
  })

  it('escapes the session id on the TTY progress line (stderr)', async () => {
    const from = scratchDir('v0-hostile')
    const id = 'evil\x1b]0;PWNED\x07\x1b[31m'
    await writeV0Log(from, { id, createdAt: T0, cwd: '/work', delegationDepth: 0 }, new Turns().turn(1, 'Hi.', 'Hello.').batches)
    let err = ''
    const tty = Object.assign(
      new Writable({
        write(chunk: Buffer | string, _encoding, callback) {
          err += chunk.toString()
          callback()
        },
      }),
      { isTTY: true },
    )
    const out = new Writable({ write: (_chunk, _encoding, callback) => callback() })
    const code = await runCli(['import', from, '--from', 'dsh-v0', '--root', join(scratchDir('dsh-hostile'), 'root')], {
      out,
      err: tty,
      env: {},
    })
    expect(code, err).toBe(0)
    expect(err).toContain('evil\\x1b]0;PWNED\\x07\\x1b[31m')
    // The bar's own carriage returns and final newline are the only controls.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence
    expect(err.replace(/[\r\n]/g, '')).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/)
  })
})
