import type { Session, SessionEvent, SessionStore } from '@dsh/session'
import type { SubagentRunKind } from '@dsh/subagent'
import type { TelemetryPipeline } from './exporter.js'
import { SessionTrace } from './session-trace.js'
import { TRACE_CONTEXT_EVENT, traceContextData } from './trace-context.js'

/**
 * The live side: one `SessionTrace` per live session, fed by the store's
 * events as they are appended. A child's run is tied to its parent's trace
 * when it starts (`subagent/run-start`): the parent's running tool call is
 * written into the child's log as a `telemetry/trace-context` event, and
 * the child's turns nest under the context its log records.
 */
export class LiveTraces {
  readonly #pipeline: TelemetryPipeline
  readonly #sessions: SessionStore
  readonly #traces = new Map<string, SessionTrace>()

  constructor(pipeline: TelemetryPipeline, sessions: SessionStore) {
    this.#pipeline = pipeline
    this.#sessions = sessions
  }

  event(session: Session, event: SessionEvent): void {
    this.#traceOf(session, event.seq).consume(event)
  }

  /**
   * Before a child's run: a spawn or a resume happens inside one of the
   * parent's tool calls, which the child's turns then belong under. A run
   * that delivers a queued message keeps the context the child has.
   */
  runStart(child: Session, kind: SubagentRunKind): void {
    if (kind === 'message') return
    const parentId = child.header.parentSession
    const parent = parentId === undefined ? undefined : this.#sessions.get(parentId)
    if (parent === undefined) return
    const call = this.#traceOf(parent, parent.seq).runningToolCall()
    if (call !== undefined) child.append(TRACE_CONTEXT_EVENT, traceContextData(call))
  }

  disposed(session: Session): void {
    const trace = this.#traces.get(session.id)
    if (trace === undefined) return
    trace.close('the session went out of memory mid-turn')
    this.#traces.delete(session.id)
  }

  closeAll(why: string): void {
    for (const trace of this.#traces.values()) trace.close(why)
    this.#traces.clear()
  }

  /** The session's trace, made on first use and primed with its own events before `seq` (a restored log, or events before activation). */
  #traceOf(session: Session, seq: number): SessionTrace {
    let trace = this.#traces.get(session.id)
    if (trace !== undefined) return trace
    const { header } = session
    trace = new SessionTrace(
      this.#pipeline.writer,
      {
        id: header.id,
        inheritedEventCount: session.inheritedEventCount,
        delegationDepth: header.delegationDepth,
        ...(header.parentSession === undefined ? {} : { parentSession: header.parentSession }),
      },
      this.#pipeline.defaults,
    )
    const earlier = []
    for (let at = session.inheritedEventCount; at < seq; at++) {
      const event = session.eventAt(at)
      if (event !== undefined) earlier.push(event)
    }
    trace.prime(earlier)
    this.#traces.set(session.id, trace)
    return trace
  }
}
