// Package agentstoolkit holds the Microsoft 365 Agents Toolkit project of
// teamsbot (m365agents.yml, env/, infra/) and, in its tests alone, the
// checks that its files are well formed, that every action is one the
// toolkit's schema knows with the parameters it takes, that every variable
// it names is defined, that its packaging step builds the app package with
// `teamsbot manifest`, and that the Bicep template sets the service's own
// settings, ports and probes.
package agentstoolkit
