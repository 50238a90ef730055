import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answer, callTools, type ModelServer, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { subagentList } from '@dsh/protocol'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun, dshStart, until } from './support/dsh-process.js'

// A cost `dsh stats`, `dsh agents` and `dsh sessions` cannot know is `null` with a reason, never a
// number: the built CLI in its own processes, against the local Chat Completions server (the only fake).

let dir: string
let root: string
let server: ModelServer | undefined
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-stats-unknown-'))
  root = join(dir, 'root')
})
afterEach(async () => {
  await server?.close()
  server = undefined
  rmSync(dir, { recursive: true, force: true })
})

const env = cleanEnv({ DSH_API_KEY: 'sk-stats-unknown-e2e' })
const dsh = (args: string[]) => dshRun([...args, '--root', root], env)

interface Cost {
  usd: number | null
  reason?: string
  pricedUsd?: number
}
interface StatsJson {
  rollup: { complete: boolean; gaps: { id: string }[]; totals: { byModel: { calls: number; callsWithoutUsage: number }[] } }
  cost: Cost | null
}

async function stats(id: string, ...extra: string[]): Promise<StatsJson> {
  const result = await dsh(['stats', id, '--json', ...extra])
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout) as StatsJson
}

async function childIds(parent: string): Promise<string[]> {
  const listed = await dsh(['agents', parent, '--json'])
  return listed.code === 0 ? subagentList.parse(JSON.parse(listed.stdout)).rows.map((row) => row.id) : []
}

function pricesFile(model: string): string {
  const path = join(dir, `prices-${model}.json`)
  writeFileSync(path, JSON.stringify({ currency: 'USD', providers: { '127.0.0.1': { [model]: { input: 1, output: 2, cacheRead: 0.5 } } } }))
  return path
}

const firstUser = (request: RecordedRequest) => request.body.messages.find((m) => m.role === 'user')?.content
const toolSteps = (request: RecordedRequest) => request.body.messages.filter((m) => m.role === 'tool').length
const spawn = (...prompts: string[]) =>
  callTools(prompts.map((prompt, i) => ({ id: `c${i}`, name: 'subagent', arguments: JSON.stringify({ prompt, label: prompt }) })))

describe('dsh stats, agents and sessions: an unknown cost is null with a reason', () => {
  it('a child killed mid model call has no usage: its cost and the tree’s are usage-not-recorded, not $0', async () => {
    server = await startModelServer((request) =>
      firstUser(request) === 'hang' ? { kind: 'stream', content: ['Work', 'ing', ' on'], hangAfter: 2 } : spawn('hang'),
    )
    const running = dshStart(['run', 'Delegate', '--root', root, '--base-url', server.baseURL, '--model', 'wombat-1'], env)
    await server.hung()
    await until(() => /^session \S+$/m.test(running.output()), 'the session id')
    const parent = /^session (\S+)$/m.exec(running.output())![1]!
    let child = ''
    await until(async () => {
      child = (await childIds(parent))[0] ?? ''
      return child !== ''
    }, 'the child')
    // The child's step/start and its two streamed chunks are durable before the kill.
    await until(async () => {
      const shown = await dsh(['show', child, '--json', '--limit', '1000'])
      const types = shown.code === 0 ? (JSON.parse(shown.stdout) as { events: { type: string }[] }).events.map((e) => e.type) : []
      return types.includes('step/start') && types.filter((type) => type === 'assistant/chunk').length === 2
    }, 'two durable chunks')
    running.child.kill('SIGKILL')
    expect(await running.exited).toBeNull()

    const priced = pricesFile('wombat-1')
    const own = await stats(child, '--prices', priced)
    expect(own.rollup.totals.byModel).toEqual([expect.objectContaining({ calls: 1, callsWithoutUsage: 1 })])
    expect(own.cost).toMatchObject({ usd: null, reason: 'usage-not-recorded', pricedUsd: 0 })
    const tree = await stats(parent, '--descendants', '--prices', priced)
    expect(tree.rollup.complete).toBe(true)
    expect(tree.cost).toMatchObject({ usd: null, reason: 'usage-not-recorded' })
    const text = await dsh(['stats', child, '--prices', priced])
    expect(text.stdout).toContain('cost: unknown: usage-not-recorded')
    expect(text.stdout).not.toContain('$0.000000\n')

    // The agents table marks the unknown cost with its reason instead of leaving it blank.
    const agents = await dsh(['agents', parent, '--prices', priced])
    expect(agents.code, agents.stderr).toBe(0)
    expect(agents.stdout).toMatch(new RegExp(`^${child} .*\\$– \\(usage-not-recorded\\)$`, 'm'))
    const other = await dsh(['agents', parent, '--prices', pricesFile('other-model')])
    expect(other.stdout).toMatch(new RegExp(`^${child} .*\\$– \\(unknown-model\\)$`, 'm')) // --json carries the same reason beside the null, in the wire row.
    const json = await dsh(['agents', parent, '--json', '--prices', pricesFile('other-model')])
    expect(json.code, json.stderr).toBe(0)
    const row = (JSON.parse(json.stdout) as { rows: { id: string; cost?: unknown; costReason?: unknown }[] }).rows.find(
      (r) => r.id === child,
    )
    expect([row?.cost, row?.costReason]).toEqual([null, 'unknown-model'])
  })

  it('a tree with an unreadable child costs null (incomplete), its priced part the lower bound', async () => {
    server = await startModelServer((request) => {
      const first = firstUser(request)
      if (first === 'one' || first === 'two') return answer([`${first} done`])
      return toolSteps(request) === 0 ? spawn('one', 'two') : answer(['Both done.'])
    })
    const run = await dsh(['run', 'Delegate', '--base-url', server.baseURL, '--model', 'wombat-1'])
    expect(run.code, run.stdout + run.stderr).toBe(0)
    const parent = /^session (\S+)$/m.exec(run.stdout)![1]!
    const [kept, lost] = await childIds(parent)
    const priced = pricesFile('wombat-1')
    const whole = (await stats(parent, '--descendants', '--prices', priced)).cost?.usd
    const lostUsd = (await stats(lost!, '--prices', priced)).cost?.usd
    expect(whole).toBeGreaterThan(0)
    expect(lostUsd).toBeGreaterThan(0)

    // The child's log is garbage and no checkpoint holds its stats: the rollup cannot count it.
    writeFileSync(join(root, lost!, 'log.jsonl.zst'), Buffer.alloc(3000, 0x5a))
    for (const name of ['projections.sqlite', 'projections.sqlite-wal', 'projections.sqlite-shm'])
      rmSync(join(root, '.dsh', name), { force: true })
    const tree = await stats(parent, '--descendants', '--prices', priced)
    expect(tree.rollup.complete).toBe(false)
    expect(tree.rollup.gaps.map((gap) => gap.id)).toEqual([lost])
    expect(tree.cost).toMatchObject({ usd: null, reason: 'incomplete' })
    expect(tree.cost?.pricedUsd).toBeCloseTo(whole! - lostUsd!, 12)
    const text = await dsh(['stats', parent, '--descendants', '--prices', priced])
    expect(text.stdout).toContain('1 missing (totals are a lower bound)')
    expect(text.stdout).toContain(`cost: unknown: incomplete (priced part $${tree.cost!.pricedUsd!.toFixed(6)})`)
    expect(await childIds(parent)).toContain(kept)
  })
})
