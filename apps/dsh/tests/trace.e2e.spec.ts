import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { callTools, type ModelServer, answer as modelAnswer, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { type V0Event, writeV0Log } from '@dsh/session-import-v0'
import { type OtlpReceiver, type ReceivedSpan, spanTree, startOtlpReceiver } from '@dsh/session-telemetry-otel/testing'
import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun, history } from './support/dsh-process.js'

// OpenTelemetry export through the built CLI, in its own process: `dsh run --otlp` against the local
// Chat Completions server (the only fake), `dsh trace` over stored and imported sessions, each exporting
// over OTLP/HTTP to a real receiver that decodes the JSON encoding.
const KEY = 'sk-e2e-otel-5e1d'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function scratch(): string {
  const { dir, cleanup } = tempDir('dsh-trace-')
  cleanups.push(cleanup)
  return dir
}

async function receiver(): Promise<OtlpReceiver> {
  const started = await startOtlpReceiver()
  cleanups.push(() => started.close())
  return started
}

const env = () => cleanEnv({ DSH_API_KEY: KEY })
const dsh = (args: string[]) => dshRun(args, env())

/**
 * The delegation: the top agent hands `level 1` to a subagent and waits; level 1 hands `level 2` on, level 2
 * hands `level 3` on, and level 3 tries once more, past the depth limit (its tool call fails). Every request
 * reports usage; the table says what each level's two requests report.
 */
const USAGE: Record<string, [{ prompt: number; completion: number }, { prompt: number; completion: number }]> = {
  top: [
    { prompt: 10, completion: 2 },
    { prompt: 12, completion: 3 },
  ],
  'level 1': [
    { prompt: 20, completion: 4 },
    { prompt: 22, completion: 5 },
  ],
  'level 2': [
    { prompt: 30, completion: 6 },
    { prompt: 32, completion: 7 },
  ],
  'level 3': [
    { prompt: 40, completion: 8 },
    { prompt: 42, completion: 9 },
  ],
}
const NEXT: Record<string, string> = { top: 'level 1', 'level 1': 'level 2', 'level 2': 'level 3', 'level 3': 'level 4' }

function delegation(request: RecordedRequest) {
  const first = String(request.body.messages.find((m) => m.role === 'user')?.content)
  const level = first.startsWith('level ') ? first : 'top'
  const [asks, answers] = USAGE[level]!
  if (!request.body.messages.some((m) => m.role === 'tool')) {
    const next = NEXT[level]!
    const args = { description: next.replace(' ', '-'), prompt: next, run_in_background: false }
    return callTools([{ id: `call-${level.replace(' ', '-')}`, name: 'subagent', arguments: JSON.stringify(args) }], asks)
  }
  return modelAnswer([`${level} done`], answers)
}

/** A root holding one session imported from a v0 log: two turns of one model step each (four spans). */
async function importedRoot(): Promise<string> {
  const dir = scratch()
  const from = join(dir, 'v0')
  const root = join(dir, 'root')
  let seq = 0
  const T0 = 1_760_000_000_000
  const event = (type: string, data: unknown): V0Event => {
    const at = seq++
    return { type, seq: at, time: T0 + 5 * at, data } as V0Event
  }
  const turn = (n: number, text: string): V0Event[] => [
    event('turn/start', { turn: n }),
    event('user/message', { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `question ${n}` }], source: { kind: 'user' } }),
    event('step/start', { turn: n, step: 0 }),
    event('assistant/message', {
      turn: n,
      step: 0,
      message: {
        id: `a${n}`,
        role: 'assistant',
        content: [{ type: 'text', text }],
        source: { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' },
      },
    }),
    event('step/end', { turn: n, step: 0 }),
    event('turn/end', { turn: n, reason: { kind: 'completed' } }),
  ]
  await writeV0Log(from, { id: 'imported', createdAt: T0, cwd: '/work', delegationDepth: 0 }, [turn(1, 'one'), turn(2, 'two')])
  const imported = await dsh(['import', from, '--from', 'dsh-v0', '--root', root, '--json'])
  expect(imported.code, imported.stderr).toBe(0)
  return root
}

describe('dsh run --otlp / dsh trace', () => {
  it('a delegation three levels deep is one trace whose span tree is the delegation tree, with the model-reported tokens and the tool error; dsh trace --descendants repeats it', async () => {
    const dir = scratch()
    const root = join(dir, 'root')
    const server: ModelServer = await startModelServer(delegation)
    cleanups.push(() => server.close())
    const live = await receiver()
    const ran = await dsh([
      'run',
      'delegate it',
      '--dialect',
      'harness',
      '--root',
      root,
      '--base-url',
      server.baseURL,
      '--model',
      'wombat-1',
      '--otlp',
      live.url,
    ])
    expect(ran.code, ran.stdout + ran.stderr).toBe(0)
    expect(ran.stderr).not.toContain('warning')
    const top = /^session (\S+)$/m.exec(ran.stdout)![1]!

    // The sessions and their parents, as the root records them.
    const listed = await dsh(['sessions', '--json', '--root', root])
    const headers = (JSON.parse(listed.stdout) as { sessions: { header: { id: string; parentSession?: string } }[] }).sessions.map(
      (s) => s.header,
    )
    expect(headers).toHaveLength(4)
    const parentOf = new Map(headers.map((h) => [h.id, h.parentSession]))

    const spans = live.spans
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1)
    const byId = new Map(spans.map((span) => [span.spanId, span]))
    const agents = spans.filter((span) => span.attributes['gen_ai.operation.name'] === 'invoke_agent')
    expect(agents.map((span) => span.attributes['gen_ai.agent.id']).sort()).toEqual([...parentOf.keys()].sort())
    // Each agent span's nearest agent ancestor is its session's parent: the span tree is the delegation tree.
    for (const span of agents) {
      let up = span.parentSpanId === undefined ? undefined : byId.get(span.parentSpanId)
      while (up !== undefined && up.attributes['gen_ai.operation.name'] !== 'invoke_agent')
        up = up.parentSpanId === undefined ? undefined : byId.get(up.parentSpanId)
      expect(up?.attributes['gen_ai.agent.id']).toBe(parentOf.get(String(span.attributes['gen_ai.agent.id'])))
    }
    const label = (span: ReceivedSpan) =>
      span.attributes['gen_ai.operation.name'] === 'invoke_agent' ? `agent ${span.attributes['gen_ai.agent.name']}` : span.name
    // Each level: its turn, a step that called `subagent` (the next level under it), and the step that answered.
    const level = (name: string, inner: unknown): unknown => [
      `agent ${name}`,
      ['chat wombat-1', ['chat wombat-1', [inner === undefined ? 'execute_tool subagent' : ['execute_tool subagent', [inner]]]]],
    ]
    // The innermost call failed (past the depth limit): no agent under it.
    expect(spanTree(spans, label)).toEqual([level('dsh', level('level-1', level('level-2', level('level-3', undefined))))])

    // Token attributes: each agent's turn carries the sum of what the model reported for its requests.
    for (const span of agents) {
      const name = String(span.attributes['gen_ai.agent.name'])
      const key = name === 'dsh' ? 'top' : name.replace('-', ' ')
      const [a, b] = USAGE[key]!
      expect(span.attributes, name).toMatchObject({
        'gen_ai.usage.input_tokens': a.prompt + b.prompt,
        'gen_ai.usage.output_tokens': a.completion + b.completion,
        'gen_ai.request.model': 'wombat-1',
        'gen_ai.provider.name': 'openai',
      })
    }

    // The failed call: its span carries the error the tool returned, as the log has it.
    const deepest = headers.find((h) => parentOf.get(h.id) !== undefined && !headers.some((c) => c.parentSession === h.id))!
    const result = (await history(deepest.id, root, env())).find((e) => e.type === 'tool/result')!
    expect(result.data.isError).toBe(true)
    const content = result.data.content as { code: string; message: string }
    const failed = spans.filter((span) => span.status.code === 2)
    expect(failed.map((span) => span.name)).toEqual(['execute_tool subagent'])
    expect(failed[0]!.status.message).toBe(`${content.code}: ${content.message}`)
    expect(failed[0]!.attributes['error.type']).toBe(content.code)
    expect(failed[0]!.attributes['gen_ai.tool.call.id']).toBe('call-level-3')

    // A replay of the stored tree, in another process, exports the same spans.
    const again = await receiver()
    const traced = await dsh(['trace', top, '--descendants', '--model', 'wombat-1', '--otlp', again.url, '--root', root, '--json'])
    expect(traced.code, traced.stderr).toBe(0)
    expect(JSON.parse(traced.stdout)).toMatchObject({ traces: [spans[0]!.traceId], exported: spans.length, dropped: 0 })
    const shape = (list: readonly ReceivedSpan[]) => list.map((s) => [s.spanId, s.parentSpanId, s.traceId, s.name, s.status.code]).sort()
    expect(shape(again.spans)).toEqual(shape(spans))
  })

  it('an imported v0 session replays as a trace', async () => {
    const root = await importedRoot()
    const otlp = await receiver()
    const traced = await dsh(['trace', 'imported', '--otlp', otlp.url, '--root', root])
    expect(traced.code, traced.stderr).toBe(0)
    expect(traced.stdout).toMatch(/^trace [0-9a-f]{32}\ntrace [0-9a-f]{32}\n4 spans of 1 session\(s\) exported to /)
    expect(spanTree(otlp.spans)).toEqual([
      ['invoke_agent dsh', ['chat']],
      ['invoke_agent dsh', ['chat']],
    ])
    expect(new Set(otlp.spans.map((span) => span.traceId)).size).toBe(2)
    expect(otlp.spans.every((span) => span.attributes['gen_ai.conversation.id'] === 'imported' && span.status.code === 0)).toBe(true)
  })

  it('spans the collector did not take fail dsh trace with CLI_TRACE_UNDELIVERED: the counts in the error details, not a success document; one stderr warning worded for a one-shot export', async () => {
    const root = await importedRoot()
    let requests = 0
    const failing = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        requests++
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"nope"}')
      })
    })
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => failing.close(() => resolve())))
    const url = `http://127.0.0.1:${(failing.address() as AddressInfo).port}/v1/traces`
    const json = await dsh(['trace', 'imported', '--otlp', url, '--root', root, '--json'])
    expect(json.code, json.stderr).toBe(1)
    expect(requests).toBeGreaterThan(0)
    const { error } = JSON.parse(json.stdout) as { error: { code: string; message: string; details: Record<string, unknown> } }
    expect(error.code).toBe('CLI_TRACE_UNDELIVERED')
    expect(error.message).toMatch(/^4 of 4 spans of 1 session\(s\) could not be delivered to .*\(the export failed /)
    expect(error.details).toMatchObject({ sessions: ['imported'], exported: 0, dropped: 4, endpoint: url })
    expect(error.details.traces).toHaveLength(2)
    expect(json.stderr.match(/OpenTelemetry spans are being dropped/g)).toHaveLength(1)
    expect(json.stderr).toContain('The replay goes on to its end and then reports how many spans it could not deliver.')
    expect(json.stderr).not.toContain('telemetry stats')

    // A collector that is down: the same error, as one readable line on stderr.
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const text = await dsh(['trace', 'imported', '--otlp', `http://127.0.0.1:${port}/v1/traces`, '--root', root])
    expect(text.code).toBe(1)
    expect(text.stdout).toBe('')
    expect(text.stderr).toMatch(/^dsh: 4 of 4 spans of 1 session\(s\) could not be delivered .* \(CLI_TRACE_UNDELIVERED\)$/m)
  })

  it('bad input: a malformed --otlp is CLI_USAGE before anything runs; an unreachable collector costs one warning, never the run', async () => {
    const dir = scratch()
    const root = join(dir, 'root')
    for (const args of [
      ['run', 'hello', '--otlp', 'not a url'],
      ['run', 'hello', '--otlp', 'ftp://collector/v1/traces'],
      ['trace', 'some-id', '--otlp', 'collector:4318'],
      ['trace', 'some-id'],
    ]) {
      const bad = await dsh([...args, '--root', root, '--json'])
      expect(bad.code, args.join(' ')).toBe(2)
      expect(JSON.parse(bad.stdout).error.code, args.join(' ')).toBe('CLI_USAGE')
    }

    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const server = await startModelServer([modelAnswer(['fine'], { prompt: 1, completion: 1 })])
    cleanups.push(() => server.close())
    const ran = await dsh(['run', 'hello', '--root', root, '--base-url', server.baseURL, '--otlp', `http://127.0.0.1:${port}/v1/traces`])
    expect(ran.code, ran.stdout + ran.stderr).toBe(0)
    expect(ran.stdout).toContain('fine')
    expect(ran.stderr.match(/OpenTelemetry spans are being dropped/g)).toHaveLength(1)
    const id = /^session (\S+)$/m.exec(ran.stdout)![1]!
    expect((await history(id, root, env())).map((e) => e.type)).toEqual([
      'user/message',
      'turn/start',
      'step/start',
      'assistant/chunk',
      'assistant/message',
      'step/end',
      'turn/end',
    ])
  })
})
