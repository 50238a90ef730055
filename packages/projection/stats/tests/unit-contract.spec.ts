import { projectionUnitSuite } from '@dsh/session-projection/testing'
import { sessionStatsUnit, sessionTitleUnit } from '../src/index.js'
import { TWO_TURNS } from './helpers.js'
import { V0_CHILD } from './v0-events.js'

// The registry's contract suite: the cut reaches init for sessions, forks cut at
// every position and folds; live = fold = revived checkpoint; JSON states that
// pass the schema; no mutation; unknown types keep the state; copies that throw
// in init/apply/view are isolated; and no garbage field or time makes them throw.
const imported = V0_CHILD.events.map(({ type, data, time }) => ({ type, data, time }))

projectionUnitSuite('sessionStats', { unit: sessionStatsUnit, script: TWO_TURNS, neverThrows: true })
projectionUnitSuite('sessionStats over imported v0 events', { unit: sessionStatsUnit, script: imported, neverThrows: true })
projectionUnitSuite('sessionTitle', { unit: sessionTitleUnit, script: TWO_TURNS, neverThrows: true })
projectionUnitSuite('sessionTitle over imported v0 events', { unit: sessionTitleUnit, script: imported, neverThrows: true })
