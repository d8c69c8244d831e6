// The part of @microsoft/teams-js (npm, pinned in package-lock.json) that
// the view page uses inside Teams, bundled by build.mjs into
// teams.js. It defines one global, TeamsbotTeams.
import { app, authentication } from "@microsoft/teams-js";

window.TeamsbotTeams = Object.freeze({ app: app, authentication: authentication });
