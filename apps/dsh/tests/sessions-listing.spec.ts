import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost } from '@dsh/host'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cli } from './support/run.js'

let dir: string
let root: string
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-sessions-listing-'))
  root = join(dir, 'root')
  const host = await createHost({ root })
  try {
    for (const [id, model] of [
      ['a-warm', 'm'],
      ['b-unpriced', 'not-in-the-table'],
    ] as const) {
      const session = host.sessions.create({ id })
      session.append('user/message', { text: `  Plan the\n release ${id} ` })
      session.append('turn/start', { turn: 1 })
      session.append('step/start', { turn: 1, step: 0, provider: 'p', model })
      session.append('assistant/message', { turn: 1, text: 'ok' })
      session.append('step/end', { turn: 1, step: 0, usage: { input: 100, output: 20 }, finish: 'stop' })
      session.append('turn/end', { turn: 1, reason: 'completed' })
    }
  } finally {
    // Disposing writes the final checkpoints of the live sessions: both are cached.
    await host.dispose()
  }
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

interface Entry {
  header: { id: string }
  title: string | null
  tokens: number | null
  cost: number | null
}

const pricesFile = (): string => {
  const path = join(dir, 'prices.json')
  writeFileSync(path, JSON.stringify({ currency: 'USD', providers: { p: { m: { input: 1, output: 4 } } } }))
  return path
}

/** Every session log of the root made unreadable garbage: a listing that opened one would fail or change its answer. */
function garbleLogs(): void {
  for (const id of readdirSync(root)) {
    const log = join(root, id, 'log.jsonl.zst')
    if (statSync(join(root, id)).isDirectory() && statSync(log, { throwIfNoEntry: false })?.isFile())
      writeFileSync(log, 'not a log: any read of it fails\n')
  }
}

describe('dsh sessions: title, tokens and cost from the projection cache', () => {
  it('lists cached values, prices them with --prices or DSH_PRICES, and leaves an unknown model unpriced (null, not 0)', async () => {
    const prices = pricesFile()
    const run = await cli(['sessions', '--root', root, '--json', '--prices', prices])
    expect(run.stderr).toBe('')
    const sessions = (JSON.parse(run.stdout) as { sessions: Entry[] }).sessions
    expect(sessions.map((s) => [s.header.id, s.title, s.tokens])).toEqual([
      ['a-warm', 'Plan the release a-warm', 120],
      ['b-unpriced', 'Plan the release b-unpriced', 120],
    ])
    expect(sessions[0]?.cost).toBeCloseTo((100 * 1 + 20 * 4) / 1e6, 12)
    expect(sessions[1]?.cost).toBeNull()
    const viaEnv = await cli(['sessions', '--root', root, '--json'], { DSH_PRICES: prices })
    expect(JSON.parse(viaEnv.stdout)).toEqual(JSON.parse(run.stdout))
    // Without a price table every cost is unknown.
    const unpriced = JSON.parse((await cli(['sessions', '--root', root, '--json'])).stdout) as { sessions: Entry[] }
    expect(unpriced.sessions.map((s) => s.cost)).toEqual([null, null])

    const text = await cli(['sessions', '--root', root, '--prices', prices])
    const lines = text.stdout.split('\n')
    expect(lines[0]).toMatch(/^id\s+created\s+origin\s+parent\s+depth\s+cut\s+tokens\s+cost\s+title$/)
    expect(lines[2]).toMatch(/^a-warm .* 120\s+\$0\.000180\s+Plan the release a-warm$/)
    // The unknown model's cost cell says so with its reason: never $0, never a blank.
    expect(lines[3]).toMatch(/^b-unpriced .* 120\s+– \(unknown-model\)\s+Plan the release b-unpriced$/)
    // Without a price table the column is blank: nothing was priced.
    const plain = (await cli(['sessions', '--root', root])).stdout.split('\n')
    expect(plain[3]).toMatch(/^b-unpriced .* 120\s+Plan the release b-unpriced$/)
  })

  it("searching a title's words finds its session (the title is the first prompt, which the index holds)", async () => {
    const listed = (JSON.parse((await cli(['sessions', '--root', root, '--json'])).stdout) as { sessions: Entry[] }).sessions
    const title = listed.find((s) => s.header.id === 'b-unpriced')?.title
    expect(title).toBe('Plan the release b-unpriced')
    const run = await cli(['search', ...(title ?? '').split(' ').slice(1, 3), 'b-unpriced', '--root', root, '--json'])
    expect(run.code, run.stderr).toBe(0)
    const hits = (JSON.parse(run.stdout) as { hits: { record: { header: { id: string } } }[] }).hits
    expect(hits.map((hit) => hit.record.header.id)).toEqual(['b-unpriced'])
  })

  it('never reads a log: with every log unreadable the cached values still list, and a session without checkpoint rows lists blank', async () => {
    // A session the cache has no stats or title rows for: its host did not register the units.
    const bare = await createHost({ root, sessionStats: false })
    try {
      const session = bare.sessions.create({ id: 'c-uncached' })
      session.append('user/message', { text: 'only in the log' })
    } finally {
      await bare.dispose()
    }
    garbleLogs()
    // The logs are unreadable indeed: a command that reads one fails.
    expect((await cli(['show', 'a-warm', '--root', root])).code).not.toBe(0)
    const run = await cli(['sessions', '--root', root, '--json', '--prices', pricesFile()])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stderr).toBe('')
    const sessions = (JSON.parse(run.stdout) as { sessions: Entry[] }).sessions
    expect(sessions.map((s) => [s.header.id, s.title, s.tokens])).toEqual([
      ['a-warm', 'Plan the release a-warm', 120],
      ['b-unpriced', 'Plan the release b-unpriced', 120],
      ['c-uncached', null, null],
    ])
    expect(sessions[2]?.cost).toBeNull()
  })
})
