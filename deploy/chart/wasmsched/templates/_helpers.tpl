{{- define "wasmsched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wasmsched.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wasmsched.labels" -}}
{{ include "wasmsched.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "wasmsched.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "wasmsched.fullname" .) -}}
{{- end -}}

{{- define "wasmsched.pluginsConfigMap" -}}
{{- .Values.pluginsConfigMap.name | default (printf "%s-plugins" (include "wasmsched.fullname" .)) -}}
{{- end -}}

{{- define "wasmsched.leaseNamespace" -}}
{{- .Values.leaderElection.namespace | default .Release.Namespace -}}
{{- end -}}

{{- define "wasmsched.leaderElect" -}}
{{- if or (gt (int .Values.replicas) 1) .Values.leaderElection.enabled -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{- define "wasmsched.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Requests and limits from parallelism and the cluster's size (values.yaml). */}}
{{- define "wasmsched.resources" -}}
{{- if .Values.resources -}}
{{- toYaml .Values.resources -}}
{{- else -}}
{{- $p := int .Values.parallelism -}}
{{- $mem := add 64 (mul 16 $p) (div (mul 8 (int .Values.clusterSize.nodes)) 1000) (div (mul 4 (int .Values.clusterSize.pods)) 1000) -}}
requests:
  cpu: {{ mul 250 $p }}m
  memory: {{ $mem }}Mi
limits:
  memory: {{ mul 2 $mem }}Mi
{{- end -}}
{{- end -}}

{{/* Adds a plugin to one extension point of a profile (a dict, changed in place). */}}
{{- define "wasmsched.enablePlugin" -}}
{{- $plugins := .profile.plugins | default dict -}}
{{- $_ := set .profile "plugins" $plugins -}}
{{- $set := get $plugins .point | default dict -}}
{{- $_ := set $plugins .point $set -}}
{{- $_ := set $set "enabled" (append ($set.enabled | default list) .entry) -}}
{{- end -}}

{{/* The scheduler's configuration: the profiles, the optional parts and the
     plugins merged into one file. */}}
{{- define "wasmsched.config" -}}
{{- $v := .Values -}}
{{- range $field := list "profiles" "builtinPlugins" "plugins" -}}
{{- if not (kindIs "slice" (get $v $field)) -}}
{{- fail (printf "%s: must be a list, got %s" $field (kindOf (get $v $field))) -}}
{{- end -}}
{{- end -}}
{{- $profiles := deepCopy $v.profiles -}}
{{- if $v.gpuSharing.enabled -}}
{{- $profiles = append $profiles (deepCopy $v.gpuSharing.profile) -}}
{{- end -}}
{{- $names := list -}}
{{- range $profiles -}}
{{- $names = append $names .schedulerName -}}
{{- end -}}
{{- if $v.gangs.enabled -}}
{{- range $v.gangs.profiles -}}
{{- if not (has . $names) -}}
{{- fail (printf "gangs.profiles: no profile %q in profiles" .) -}}
{{- end -}}
{{- end -}}
{{- range $profiles -}}
{{- if has .schedulerName $v.gangs.profiles -}}
{{- include "wasmsched.enablePlugin" (dict "profile" . "point" "multiPoint" "entry" (dict "name" "Coscheduling")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $wasm := deepCopy $v.builtinPlugins -}}
{{- range $plugin := $v.plugins -}}
{{- if not $plugin.name -}}{{- fail "plugins[]: an entry without a name" -}}{{- end -}}
{{- $entry := dict "name" $plugin.name -}}
{{- if $plugin.oci -}}
{{- if or $plugin.file $plugin.base64 $plugin.image -}}{{- fail (printf "plugins[%s]: oci names the component: no file, base64 or image beside it" $plugin.name) -}}{{- end -}}
{{- if not (hasPrefix "oci://" $plugin.oci) -}}{{- fail (printf "plugins[%s].oci: %q does not start with oci://" $plugin.name $plugin.oci) -}}{{- end -}}
{{- $_ := set $entry "path" $plugin.oci -}}
{{- else -}}
{{- if not $plugin.file -}}{{- fail (printf "plugins[%s]: no file (e.g. policy.wasm.gz) and no oci" $plugin.name) -}}{{- end -}}
{{- $dir := ternary "/etc/wasmsched/image-plugins" "/etc/wasmsched/plugins" (not (empty $plugin.image)) -}}
{{- $_ := set $entry "path" (printf "%s/%s" $dir $plugin.file) -}}
{{- end -}}
{{- range $k := list "timeout" "initTimeout" "memoryLimit" "failurePolicy" "allowTags" -}}
{{- if hasKey $plugin $k -}}{{- $_ := set $entry $k (get $plugin $k) -}}{{- end -}}
{{- end -}}
{{- $wasm = append $wasm $entry -}}
{{- range $profileName, $use := $plugin.profiles -}}
{{- if not (has $profileName $names) -}}
{{- fail (printf "plugins[%s].profiles: no profile %q in profiles" $plugin.name $profileName) -}}
{{- end -}}
{{- range $profiles -}}
{{- if eq .schedulerName $profileName -}}
{{- $profile := . -}}
{{- range $point := ($use.points | default (list "multiPoint")) -}}
{{- $ref := dict "name" $plugin.name -}}
{{- if $use.weight -}}{{- $_ := set $ref "weight" $use.weight -}}{{- end -}}
{{- include "wasmsched.enablePlugin" (dict "profile" $profile "point" $point "entry" $ref) -}}
{{- end -}}
{{- if $use.args -}}
{{- $_ := set $profile "pluginConfig" (append ($profile.pluginConfig | default list) (dict "name" $plugin.name "args" $use.args)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $config := dict
  "apiVersion" "wasmsched.io/v1alpha1"
  "kind" "WasmSchedulerConfiguration"
  "parallelism" (int $v.parallelism)
  "bindConcurrency" (int $v.bindConcurrency)
  "clientConnection" (dict "qps" $v.clientConnection.qps "burst" $v.clientConnection.burst)
  "pluginCacheDir" "/var/cache/wasmsched"
  "wasmPlugins" $wasm
  "profiles" $profiles
  "leaderElection" (dict
    "leaderElect" (eq (include "wasmsched.leaderElect" .) "true")
    "resourceName" $v.leaderElection.resourceName
    "resourceNamespace" (include "wasmsched.leaseNamespace" .)
    "leaseDuration" $v.leaderElection.leaseDuration
    "renewDeadline" $v.leaderElection.renewDeadline
    "retryPeriod" $v.leaderElection.retryPeriod) -}}
{{- $registry := dict "timeout" $v.pluginRegistry.timeout "retries" (int $v.pluginRegistry.retries) -}}
{{- with $v.pluginRegistry.secretName -}}{{- $_ := set $registry "credentialsFile" "/etc/wasmsched/registry/.dockerconfigjson" -}}{{- end -}}
{{- with $v.pluginRegistry.caConfigMap -}}{{- $_ := set $registry "caFile" "/etc/wasmsched/registry-ca/ca.crt" -}}{{- end -}}
{{- with $v.pluginRegistry.plainHTTP -}}{{- $_ := set $registry "plainHTTP" . -}}{{- end -}}
{{- $_ := set $config "pluginRegistry" $registry -}}
{{- if $v.deletionCost.enabled -}}
{{- $_ := set $config "deletionCost" $v.deletionCost.config -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
