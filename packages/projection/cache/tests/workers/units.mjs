// The unit the crash worker and the e2e test share (plain JS: the worker runs
// without a TypeScript loader).
import { z } from '@dsh/session-projection'

/** Counts events per type: every event changes the state. */
export const countUnit = {
  key: 'eventCounts',
  stateVersion: 1,
  init: () => ({ total: 0, byType: {} }),
  apply: (state, event) => ({ total: state.total + 1, byType: { ...state.byType, [event.type]: (state.byType[event.type] ?? 0) + 1 } }),
  view: (state) => state,
  schema: z.object({ total: z.number().int().nonnegative(), byType: z.record(z.string(), z.number().int().positive()) }),
}
