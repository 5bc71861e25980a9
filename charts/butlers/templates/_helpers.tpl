{{/* The operator's name, also its ServiceAccount and RBAC objects. */}}
{{- define "butlers.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "butlers.labels" -}}
app.kubernetes.io/part-of: butlers
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "butlers.operatorSelector" -}}
app.kubernetes.io/name: butlers-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "butlers.postgresName" -}}
{{- printf "%s-postgres" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The development PostgreSQL's password Secret: the user's, or the one the chart keeps. */}}
{{- define "butlers.postgresPasswordSecret" -}}
{{- .Values.postgres.existingSecret | default (printf "%s-admin" (include "butlers.postgresName" .)) -}}
{{- end -}}

{{/*
The development PostgreSQL's password: given, else the one kept in the cluster, else a new
one, generated only where the renderer can see the cluster (a `helm install`); elsewhere
(helm template, Argo CD) a new password at every render would lock the operator out.
*/}}
{{- define "butlers.postgresPassword" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (printf "%s-admin" (include "butlers.postgresName" .)) -}}
{{- if .Values.postgres.password -}}
{{- .Values.postgres.password -}}
{{- else if and $secret $secret.data (index $secret.data "password") -}}
{{- index $secret.data "password" | b64dec -}}
{{- else if lookup "v1" "Namespace" "" "kube-system" -}}
{{- randAlphaNum 32 -}}
{{- else -}}
{{- fail "postgres.enabled: set postgres.password or postgres.existingSecret; rendered without access to the cluster (helm template, Argo CD) the chart cannot see the password it generated, and a new one at every render would lock the operator out of the kept data" -}}
{{- end -}}
{{- end -}}

{{/* The NetworkPolicy settings for the operator: values, plus the chart's own database. */}}
{{- define "butlers.networkPolicy" -}}
{{- $policy := deepCopy .Values.networkPolicy -}}
{{- if and .Values.otlp.endpoint $policy.enabled (not (or $policy.otlp.cidrs $policy.otlp.peers)) -}}
{{- fail "otlp.endpoint is set but networkPolicy.otlp has no cidrs or peers, so every span would be dropped: set networkPolicy.otlp.peers (the collector's pods, e.g. a namespaceSelector and podSelector) or networkPolicy.otlp.cidrs" -}}
{{- end -}}
{{- if .Values.postgres.enabled -}}
{{- $peer := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace)) "podSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" "butlers-postgres" "app.kubernetes.io/instance" .Release.Name)) -}}
{{- $database := $policy.database -}}
{{- $_ := set $database "peers" (append ($database.peers | default list) $peer) -}}
{{- end -}}
{{- toJson $policy -}}
{{- end -}}

{{/* The Secret holding the PostgreSQL admin connection. */}}
{{- define "butlers.adminSecret" -}}
{{- if .Values.postgres.enabled -}}
{{- include "butlers.postgresPasswordSecret" . -}}
{{- else -}}
{{- required "database.adminSecret.name is required unless postgres.enabled is true" .Values.database.adminSecret.name -}}
{{- end -}}
{{- end -}}

{{/* Every namespace the operator serves in namespaced mode (the release's first). */}}
{{- define "butlers.namespaces" -}}
{{- $all := prepend .Values.watch.namespaces .Release.Namespace | uniq -}}
{{- join "," $all -}}
{{- end -}}

{{- define "butlers.dashboardName" -}}
{{- printf "%s-dashboard" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The namespace whose Butlers the dashboard shows (it runs there). */}}
{{- define "butlers.dashboardNamespace" -}}
{{- $namespace := .Values.dashboard.namespace | default .Release.Namespace -}}
{{- if and (ne .Values.watch.mode "cluster") (not (has $namespace (splitList "," (include "butlers.namespaces" .)))) -}}
{{- fail (printf "dashboard.namespace %s is not watched by the operator: add it to watch.namespaces" $namespace) -}}
{{- end -}}
{{- $namespace -}}
{{- end -}}

{{- define "butlers.dashboardSelector" -}}
app.kubernetes.io/name: butlers-dashboard
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Secret where the operator writes the dashboard's database credentials. */}}
{{- define "butlers.dashboardDatabaseSecret" -}}
{{- printf "%s-db" (include "butlers.dashboardName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The dashboard's token Secret: the user's, or the one the chart keeps. */}}
{{- define "butlers.dashboardTokenSecret" -}}
{{- .Values.dashboard.existingSecret | default (include "butlers.dashboardName" .) -}}
{{- end -}}

{{/* The dashboard's login role and own schema: per release, since roles are server-wide. */}}
{{- define "butlers.dashboardRole" -}}
{{- printf "%s%s_dashboard" .Values.database.schemaPrefix (.Release.Name | replace "-" "_") -}}
{{- end -}}

{{/* The PostgreSQL ports the dashboard may reach: the values', else the usual one. */}}
{{- define "butlers.databasePorts" -}}
{{- toJson (.Values.networkPolicy.database.ports | default (list 5432)) -}}
{{- end -}}

{{/* A fixed UID and GID, unless runAsUser is null (OpenShift's restricted-v2 assigns one
from the namespace's range and rejects any other). */}}
{{- define "butlers.runAsUser" -}}
{{- with .Values.runAsUser -}}
runAsUser: {{ . }}
runAsGroup: {{ . }}
{{- end -}}
{{- end -}}

{{/* Pod defaults for every butler: `butlerPod`, and the chart's runAsUser. */}}
{{- define "butlers.podDefaults" -}}
{{- toJson (merge (dict "runAsUser" .Values.runAsUser) .Values.butlerPod) -}}
{{- end -}}

{{/* The Secret holding /metrics' bearer token (the operator creates it). */}}
{{- define "butlers.metricsSecret" -}}
{{- printf "%s-metrics" (include "butlers.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
