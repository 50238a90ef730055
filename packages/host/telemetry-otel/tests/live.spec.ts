import { createHost, type Host } from '@dsh/host'
import { createScriptedDriver } from '@dsh/subagent'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import { replaySessionTraces, sessionTelemetryPlugin, TRACE_CONTEXT_EVENT } from '../src/index.js'
import { type ReceivedSpan, spanTree } from '../src/testing/index.js'
import { afterThisTest, receiver } from './support/cleanup.js'

async function host(): Promise<Host> {
  const { dir, cleanup } = tempDir('dsh-otel-')
  afterThisTest(cleanup)
  // The child answers with a tool call of its own and a message with usage.
  const driver = createScriptedDriver([
    { kind: 'tool', name: 'lookup', arguments: { q: 'wombats' }, result: { text: 'found 3' } },
    { kind: 'chunk', text: 'three' },
    { kind: 'message', text: 'three', usage: { input: 11, output: 4 } },
  ])
  const h = await createHost({ root: dir, driver })
  afterThisTest(() => h.dispose())
  return h
}

const label = (span: ReceivedSpan): string => span.name

describe('live spans', () => {
  it('a turn, its steps and tool calls, and a child run under the tool call that spawned it: one trace; a replay gives the same spans', async () => {
    const otlp = await receiver()
    const h = await host()
    await h.ctx.activate(sessionTelemetryPlugin({ otlp: otlp.url, model: 'wombat-1', provider: 'openai' }))
    const parent = h.sessions.create({ id: 'parent' })
    parent.append('user/message', { text: 'count the wombats' })
    parent.append('turn/start', { turn: 1 })
    parent.append('tool/call', { turn: 1, callId: 'c1', name: 'subagent', arguments: {} })
    parent.append('tool/call', { turn: 1, callId: 'c2', name: 'fetch', arguments: {} })
    // The spawn happens while the parent's tool call runs, as a driver runs it.
    const handle = h.subagents.spawn(parent, { mode: 'one-shot', label: 'counter', context: 'fresh', prompt: 'count', id: 'child' })
    await handle.done
    parent.append('tool/result', { turn: 1, callId: 'c1', content: { text: 'three' } })
    parent.append('tool/result', { turn: 1, callId: 'c2', content: { code: 'FETCH_FAILED', message: 'no network' }, isError: true })
    parent.append('assistant/chunk', { turn: 1, index: 0, delta: 'Three.' })
    parent.append('assistant/message', { turn: 1, text: 'Three.', usage: { input: 20, output: 6 } })
    parent.append('turn/end', { turn: 1, reason: 'completed' })
    await h.ctx.require('sessionTelemetry').flush()
    expect(h.ctx.require('sessionTelemetry').stats()).toMatchObject({ dropped: 0, exported: 9, pending: 0 })

    const spans = otlp.spans
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1)
    expect(spanTree(spans, label)).toEqual([
      [
        'invoke_agent dsh',
        [
          'chat wombat-1',
          [
            'chat wombat-1',
            [
              'execute_tool fetch',
              ['execute_tool subagent', [['invoke_agent counter', ['chat wombat-1', ['chat wombat-1', ['execute_tool lookup']]]]]],
            ],
          ],
        ],
      ],
    ])
    const byName = (name: string) => spans.find((span) => span.name === name)!
    expect(byName('invoke_agent dsh').attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.id': 'parent',
      'gen_ai.usage.input_tokens': 20,
      'gen_ai.usage.output_tokens': 6,
      'gen_ai.provider.name': 'openai',
      'dsh.turn.end_reason': 'completed',
    })
    expect(byName('invoke_agent counter').attributes).toMatchObject({
      'gen_ai.agent.id': 'child',
      'gen_ai.usage.input_tokens': 11,
      'gen_ai.usage.output_tokens': 4,
      'gen_ai.provider.name': 'scripted',
      'dsh.session.parent': 'parent',
      'dsh.delegation.depth': 1,
    })
    expect(byName('execute_tool subagent').attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'subagent',
      'gen_ai.tool.call.id': 'c1',
    })
    expect(byName('chat wombat-1').attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'wombat-1' })
    expect(byName('execute_tool fetch').status).toEqual({ code: 2, message: 'FETCH_FAILED: no network' })
    expect(byName('execute_tool fetch').attributes['error.type']).toBe('FETCH_FAILED')
    expect(byName('execute_tool subagent').status.code).toBe(0)

    // The child's log: the descriptor stays its first own event, the trace context follows it and precedes the run.
    const child = await h.persistence.load(handle.id)
    expect(child.events.slice(0, 3).map((event) => event.type)).toEqual(['subagent/descriptor', TRACE_CONTEXT_EVENT, 'subagent/start'])
    expect(child.events[0]!.data).toEqual({ version: 2, mode: 'one-shot', provider: 'scripted', label: 'counter' })
    const call = byName('execute_tool subagent')
    expect(child.events[1]!.data).toEqual({ traceparent: `00-${call.traceId}-${call.spanId}-01` })

    // A replay of the stored logs (in another pipeline, as another process would) gives the same spans.
    const again = await receiver()
    const replayed = await replaySessionTraces([await h.persistence.load(parent.id), child], {
      otlp: again.url,
      model: 'wombat-1',
      provider: 'openai',
    })
    expect(replayed.stats).toMatchObject({ exported: 9, dropped: 0 })
    expect(replayed.traceIds).toEqual([spans[0]!.traceId])
    const shape = (list: readonly ReceivedSpan[]) =>
      list.map((s) => [s.traceId, s.spanId, s.parentSpanId, s.name, s.start, s.end, s.status.code]).sort()
    expect(shape(again.spans)).toEqual(shape(spans))
  })

  it('a child replayed on its own joins the trace its log names; a fork counts only its own events', async () => {
    const otlp = await receiver()
    const h = await host()
    await h.ctx.activate(sessionTelemetryPlugin({ otlp: otlp.url }))
    const parent = h.sessions.create({ id: 'parent' })
    parent.append('turn/start', { turn: 1 })
    parent.append('assistant/message', { turn: 1, text: 'before' })
    parent.append('turn/end', { turn: 1, reason: 'completed' })
    parent.append('turn/start', { turn: 2 })
    parent.append('tool/call', { turn: 2, callId: 'c1', name: 'subagent', arguments: {} })
    const handle = h.subagents.spawn(parent, { mode: 'one-shot', context: 'fork', prompt: 'go', id: 'forked' })
    await handle.done
    parent.append('tool/result', { turn: 2, callId: 'c1', content: null })
    parent.append('turn/end', { turn: 2, reason: 'completed' })
    await h.ctx.require('sessionTelemetry').flush()
    const call = otlp.spans.find((span) => span.name === 'execute_tool subagent')!
    const forkTurns = otlp.spans.filter((span) => span.attributes['gen_ai.agent.id'] === 'forked' && span.name.startsWith('invoke_agent'))
    // The inherited turn 1 is the parent's: the fork has one turn span, its own, under the tool call.
    expect(forkTurns.map((span) => [span.traceId, span.parentSpanId, span.attributes['dsh.turn']])).toEqual([
      [call.traceId, call.spanId, 2],
    ])

    const alone = await receiver()
    await replaySessionTraces([await h.persistence.load(handle.id)], { otlp: alone.url })
    expect(alone.spans.find((span) => span.name.startsWith('invoke_agent'))).toMatchObject({
      traceId: call.traceId,
      parentSpanId: call.spanId,
      spanId: forkTurns[0]!.spanId,
    })
  })

  it('a turn left open ends unfinished: live when the host is disposed, in a replay at the log end', async () => {
    const otlp = await receiver()
    const h = await host()
    await h.ctx.activate(sessionTelemetryPlugin({ otlp: otlp.url }))
    const session = h.sessions.create({ id: 'open' })
    session.append('turn/start', { turn: 1 })
    session.append('tool/call', { turn: 1, callId: 'c1', name: 'slow', arguments: {} })
    await h.dispose()
    expect(otlp.spans.map((span) => [span.name, span.status.code, span.attributes['error.type']]).sort()).toEqual([
      ['chat', 2, 'unfinished'],
      ['execute_tool slow', 2, 'unfinished'],
      ['invoke_agent dsh', 2, 'unfinished'],
    ])
  })
})
