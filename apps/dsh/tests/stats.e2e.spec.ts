import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answer, type ChatUsage, callTools, type ModelServer, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { subagentList } from '@dsh/protocol'
import { type V0Event, writeV0Log } from '@dsh/session-import-v0'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

// `dsh stats` as a user runs it: the built CLI in its own process, after `dsh run`
// delegations against the local Chat Completions server (the only fake), whose own
// record of the usage it reported is the truth the rollup must equal.
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')

let dir: string
let root: string
let server: ModelServer | undefined
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-stats-'))
  root = join(dir, 'root')
})
afterEach(async () => {
  await server?.close()
  server = undefined
  rmSync(dir, { recursive: true, force: true })
})

function dsh(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { DSH_API_KEY: _a, OPENAI_API_KEY: _b, DSH_BASE_URL: _c, OPENAI_BASE_URL: _d, DSH_MODEL: _e, DSH_PRICES: _f, ...rest } = process.env
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: { ...rest, DSH_API_KEY: 'sk-stats-e2e' } }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stdout, stderr })
    })
  })
}

interface Tokens {
  input: number
  output: number
  cacheRead: number
  cacheWrite: number
  reasoning: number
}
interface StatsJson {
  title: string | null
  sessions: { id: string; depth: number; status: string; subagent: boolean; tokens: number | null; title: string | null }[]
  rollup: { sessions: number; complete: boolean; totals: { turns: number; tokens: Tokens } }
  cost: { usd: number | null; reason?: string } | null
  costReason?: string
}

async function stats(id: string, ...extra: string[]): Promise<StatsJson> {
  const result = await dsh(['stats', id, '--json', '--root', root, ...extra])
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout) as StatsJson
}

/** The disjoint counts of one report, computed here from the protocol's overlapping ones (the README's mapping). */
function disjoint(usage: ChatUsage): Tokens {
  const cacheRead = usage.prompt_tokens_details.cached_tokens
  const reasoning = usage.completion_tokens_details.reasoning_tokens
  return { input: usage.prompt_tokens - cacheRead, output: usage.completion_tokens - reasoning, cacheRead, cacheWrite: 0, reasoning }
}
function sum(list: readonly Tokens[]): Tokens {
  const total = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 }
  for (const t of list) for (const kind of Object.keys(total) as (keyof Tokens)[]) total[kind] += t[kind]
  return total
}
const all = (t: Tokens) => t.input + t.output + t.cacheRead + t.cacheWrite + t.reasoning

const users = (request: RecordedRequest) => request.body.messages.filter((m) => m.role === 'user').map((m) => String(m.content))
const toolSteps = (request: RecordedRequest) => request.body.messages.filter((m) => m.role === 'tool').length
const spawn = (id: string, prompt: string, extra = '') =>
  callTools([{ id, name: 'subagent', arguments: `{"prompt":"${prompt}","label":"${id}"${extra}}` }])

describe('dsh stats', () => {
  it('after a delegation three levels deep, the rolled-up tokens equal exactly what the server reported; a fork counts only its own suffix', async () => {
    server = await startModelServer((request) => {
      const said = users(request)
      if (said.includes('fork work')) return answer(['forked ', 'answer'], undefined, ['hmm'])
      const first = said[0]
      if (first === 'level 3') return answer(['deepest'], undefined, ['deep', 'thought'])
      if (first === 'level 2') return toolSteps(request) === 0 ? spawn('l3', 'level 3') : answer(['two done'])
      if (first === 'level 1') return toolSteps(request) === 0 ? spawn('l2', 'level 2') : answer(['one done'])
      if (first !== 'Warm up.') return undefined
      if (said.length === 1) return answer(['Warm ', 'now.'], undefined, ['stretch'])
      if (toolSteps(request) === 0) return spawn('l1', 'level 1')
      if (toolSteps(request) === 1) return spawn('forky', 'fork work', ',"context":"fork"')
      return answer(['All ', 'delegated.'])
    })
    const model = ['--base-url', server.baseURL, '--model', 'wombat-1']
    const warm = await dsh(['run', 'Warm up.', '--root', root, ...model])
    expect(warm.code, warm.stdout + warm.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(warm.stdout)![1]!
    const afterWarm = server.reported.length
    const delegation = await dsh(['run', 'Delegate it.', '--resume', id, '--root', root, ...model])
    expect(delegation.code, delegation.stdout + delegation.stderr).toBe(0)
    expect(delegation.stdout).toContain('All delegated.')

    // The server's own record: every response reported usage, cached and reasoning details included.
    expect(server.reported.map((report) => report.request)).toEqual(server.requests.map((_request, index) => index))
    expect(server.reported.some((report) => report.usage.prompt_tokens_details.cached_tokens > 0)).toBe(true)
    expect(server.reported.some((report) => report.usage.completion_tokens_details.reasoning_tokens > 0)).toBe(true)
    const reported = sum(server.reported.map((report) => disjoint(report.usage)))

    const tree = await stats(id, '--descendants')
    expect(tree.rollup.complete).toBe(true)
    expect(tree.sessions.map((s) => [s.depth, s.status, s.subagent])).toEqual([
      [0, 'ok', false],
      [1, 'ok', true],
      [2, 'ok', true],
      [3, 'ok', true],
      [1, 'ok', true],
    ])
    expect(tree.rollup.totals.tokens).toEqual(reported)
    expect(tree.title).toBe('Warm up.')

    // The fork inherited the root's first turn (its usage included) and counts only its own turn.
    const forkReports = server.reported.filter((report) => users(server!.requests[report.request]!).includes('fork work'))
    expect(forkReports.length).toBe(1)
    const fork = await stats(tree.sessions[4]!.id)
    expect(fork.rollup.totals.turns).toBe(1)
    expect(fork.rollup.totals.tokens).toEqual(sum(forkReports.map((report) => disjoint(report.usage))))
    expect(fork.sessions[0]!.tokens).toBe(all(fork.rollup.totals.tokens))

    // Alone, the root counts its own two turns: everything but what its descendants reported.
    const rootReports = server.reported.filter(
      (report) =>
        users(server!.requests[report.request]!)[0] === 'Warm up.' && !users(server!.requests[report.request]!).includes('fork work'),
    )
    expect(rootReports.length).toBe(afterWarm + 3)
    const alone = await stats(id)
    expect(alone.rollup.totals.turns).toBe(2)
    expect(alone.rollup.totals.tokens).toEqual(sum(rootReports.map((report) => disjoint(report.usage))))

    // Cost: priced when the table knows the model; unknown (never 0) when it does not.
    expect(tree.cost).toBeNull()
    expect(tree.costReason).toBe('no-price-table')
    const prices = join(dir, 'prices.json')
    writeFileSync(
      prices,
      JSON.stringify({
        currency: 'USD',
        providers: { '127.0.0.1': { 'wombat-1': { input: 1, output: 2, cacheRead: 0.5, reasoning: 3 } } },
      }),
    )
    const priced = await stats(id, '--descendants', '--prices', prices)
    const usd = (reported.input * 1 + reported.output * 2 + reported.cacheRead * 0.5 + reported.reasoning * 3) / 1_000_000
    expect(priced.cost?.usd).toBeCloseTo(usd, 12)
    // The catalog prices each child as `dsh stats` prices it alone; the root's own cost and its rows' add up to the tree's.
    const agents = await dsh(['agents', id, '--descendants', '--json', '--root', root, '--prices', prices])
    expect(agents.code, agents.stderr).toBe(0)
    const rows = subagentList.parse(JSON.parse(agents.stdout)).rows
    expect(rows).toHaveLength(4)
    let rowsUsd = 0
    for (const row of rows) {
      const own = (await stats(row.id, '--prices', prices)).cost?.usd
      expect(own).toBeGreaterThan(0)
      expect(row.cost).toBeCloseTo(own!, 12)
      rowsUsd += row.cost!
    }
    expect((await stats(id, '--prices', prices)).cost!.usd! + rowsUsd).toBeCloseTo(usd, 12)
    const table = await dsh(['agents', id, '--descendants', '--root', root, '--prices', prices])
    expect(table.stdout).toContain(`$${rows[0]!.cost!.toFixed(6)}`)
    // Without a price table the rows carry no cost (the body of an unpriced server).
    const unpriced = subagentList.parse(JSON.parse((await dsh(['agents', id, '--descendants', '--json', '--root', root])).stdout)).rows
    expect(unpriced.map((row) => 'cost' in row)).toEqual([false, false, false, false])
    writeFileSync(prices, JSON.stringify({ currency: 'USD', providers: { '127.0.0.1': { 'other-model': { input: 1, output: 2 } } } }))
    const unknown = await stats(id, '--descendants', '--prices', prices)
    expect(unknown.cost).toMatchObject({ usd: null, reason: 'unknown-model' })

    // As a person reads it.
    const text = await dsh(['stats', id, '--descendants', '--root', root])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain('5 session(s) with descendants')
    expect(text.stdout).toContain(`(total ${all(reported)})`)
  })

  it('an imported v0 session shows the usage its events carry', async () => {
    const from = join(dir, 'v0')
    const T0 = 1_760_000_000_000
    const events: V0Event[] = [
      { type: 'turn/start', seq: 0, time: T0, data: { turn: 1 } },
      {
        type: 'user/message',
        seq: 1,
        time: T0 + 1,
        data: { id: 'u1', role: 'user', content: [{ type: 'text', text: 'Plan  the\nrelease.' }], source: { kind: 'user' } },
        surfaceOp: 'append',
      },
      { type: 'step/start', seq: 2, time: T0 + 2, data: { turn: 1, step: 0 } },
      {
        type: 'assistant/message',
        seq: 3,
        time: T0 + 50,
        data: {
          turn: 1,
          step: 0,
          message: {
            id: 'a1',
            role: 'assistant',
            content: [{ type: 'text', text: 'Freeze, test, tag.' }],
            source: { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' },
          },
          usage: { inputTokens: 120, outputTokens: 40, cacheReadTokens: 64 },
        },
        surfaceOp: 'append',
      },
      { type: 'step/end', seq: 4, time: T0 + 51, data: { turn: 1, step: 0 } },
      { type: 'turn/end', seq: 5, time: T0 + 52, data: { turn: 1, reason: { kind: 'completed' } } },
    ]
    await writeV0Log(from, { id: 'imported-1', createdAt: T0, cwd: '/work', delegationDepth: 0 }, [events])
    const imported = await dsh(['import', from, '--from', 'dsh-v0', '--root', root])
    expect(imported.code, imported.stdout + imported.stderr).toBe(0)
    const shown = await stats('imported-1')
    expect(shown.title).toBe('Plan the release.')
    expect(shown.rollup.totals.turns).toBe(1)
    expect(shown.rollup.totals.tokens).toEqual({ input: 120, output: 40, cacheRead: 64, cacheWrite: 0, reasoning: 0 })
  })

  it('an unknown session is SUBAGENT_NOT_FOUND and a bad price table its own code, both exit 1', async () => {
    server = await startModelServer(() => answer(['hi']))
    const made = await dsh(['run', 'hello', '--root', root, '--base-url', server.baseURL, '--model', 'm'])
    expect(made.code, made.stderr).toBe(0)
    const missing = await dsh(['stats', 'no-such-session', '--root', root])
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining('SUBAGENT_NOT_FOUND')])
    const prices = join(dir, 'bad.json')
    writeFileSync(prices, JSON.stringify({ currency: 'EUR', providers: {} }))
    const bad = await dsh(['stats', 'no-such-session', '--root', root, '--prices', prices])
    expect([bad.code, bad.stderr]).toEqual([1, expect.stringContaining('SESSION_STATS_INVALID_PRICE_TABLE')])
  })
})
